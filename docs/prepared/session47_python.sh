# Session 47: the Python package on the GPU with torch: every Python test
# (the new API fuzz on torch CUDA tensors included), the fuzz at three more
# seeds, then the race drop-in's cases. Finds the build of the checks call.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; extension: $(ls $B/python/tilecraft/_C*.so 2>/dev/null | wc -l)"
export TILECRAFT_CACHE_DIR=$PWD/$B/test_jit_cache
t0=$SECONDS; timeout 240 scripts/python_tests.sh $B > $OUT/python_tests.log 2>&1
echo "python tests rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/python_tests.log)"
grep -E "FAILED|SKIPPED|Error" $OUT/python_tests.log | head -20
for s in 1 2 3; do
  t0=$SECONDS; TILECRAFT_FUZZ_SEED=$s PYTHONPATH=$B/python:python/tests timeout 60 python3 -m pytest python/tests/test_api_fuzz.py -q -p no:cacheprovider -k torch > $OUT/fuzz_seed$s.log 2>&1
  echo "fuzz seed $s rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/fuzz_seed$s.log)"
done
t0=$SECONDS; PYTHONPATH=$B/python timeout $((570 - SECONDS)) python3 -m tilecraft.race moe > $OUT/race_dropin.log 2>&1
echo "race drop-in rc=$? in $((SECONDS - t0))s"; tail -12 $OUT/race_dropin.log
cd $O && tar czf logs.tgz l
