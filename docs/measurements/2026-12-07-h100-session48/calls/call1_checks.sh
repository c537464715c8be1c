# Session 47, first GPU call (on whichever board came): build, the Python
# package's tests with torch (the API fuzz on torch CUDA tensors is new),
# the fuzz at two more seeds, then the full GPU suite in the time left.
# DEADLINE=N (default 570) cuts each step to what is left.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
D=${DEADLINE:-570}
cap() { local l=$((D - SECONDS)); echo $(( $1 < l ? $1 : l )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log); extension: $(ls $B/python/tilecraft/_C*.so 2>/dev/null | wc -l)"
export TILECRAFT_CACHE_DIR=$PWD/$B/test_jit_cache
run() {  # name, timeout, command...
  local n=$1 t=$2; shift 2; local t0=$SECONDS
  [ $t -lt 15 ] && { echo "$n: skipped (no time left)"; return; }
  timeout $t "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/$n.log | cut -c1-200)"
}
run python_tests $(cap 200) scripts/python_tests.sh $B
grep -E "FAILED|SKIPPED|Error" $OUT/python_tests.log | head -20
for s in 1 2; do
  TILECRAFT_FUZZ_SEED=$s PYTHONPATH=$B/python:python/tests run fuzz_seed$s $(cap 60) python3 -m pytest python/tests/test_api_fuzz.py -q -p no:cacheprovider -k torch
done
run gpu_tests $(cap 400) ctest --test-dir $B -L gpu -j 6 --output-on-failure
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
cd $O && tar czf logs.tgz l
