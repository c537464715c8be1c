# Session 48 on two GPUs: ops on cuda:1 tensors while cuda:0 is current and
# the other way round (Python, against the same call on one GPU), the torch
# fuzz whose 'other device' now moves tensors to the other GPU, and the C++
# context test; session 49: the CLI on cuda:1 (--device 1: env, a test and
# a short bench, whose records must name device 1). DEADLINE=N (default 300)
# cuts the steps.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
D=${DEADLINE:-300}
nvidia-smi --query-gpu=index,name --format=csv,noheader
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j32 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s"
export TILECRAFT_CACHE_DIR=$PWD/$B/test_jit_cache PYTHONPATH=$B/python:python/tests
t0=$SECONDS; timeout $((D - SECONDS)) python3 -m pytest python/tests/test_ops_cuda.py -q -p no:cacheprovider \
  -k "tensors_gpu or matches_cpu" -rs > $OUT/two_gpus.log 2>&1
echo "two-GPU python rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/two_gpus.log)"; grep -aE "^E |SKIPPED" $OUT/two_gpus.log | cut -c1-300 | head
t0=$SECONDS; timeout $((D - SECONDS)) python3 -m pytest python/tests/test_api_fuzz.py -q -p no:cacheprovider -k torch > $OUT/fuzz.log 2>&1
echo "fuzz rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/fuzz.log)"; grep -a "Failed:" $OUT/fuzz.log | cut -c1-300 | head -3
timeout $((D - SECONDS)) ctest --test-dir $B -R "GivesTheCallers" > $OUT/ctest.log 2>&1; echo "ctest rc=$?: $(grep -a 'tests passed' $OUT/ctest.log)"
# --device 1: env names ordinal 1 and its PCI address; moe_reduce_fused's smoke tests pass
# there; a short bench runs there (its ceilings measured on cuda:1).
$B/tilecraft env --device 1 > $OUT/env1.log 2>&1; echo "env --device 1 rc=$?: $(grep -aE 'device_ordinal|pci_bus_id' $OUT/env1.log | tr -s ' ' | tr '\n' ';')"
t0=$SECONDS; timeout $((D - SECONDS)) $B/tilecraft test --device 1 --op moe_reduce_fused --tag smoke > $OUT/test1.log 2>&1
echo "test --device 1 rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/test1.log)"
t0=$SECONDS; timeout $((D - SECONDS)) $B/tilecraft bench --device 1 --op moe_reduce_fused --workload tiny --repeat 5 --warmup 2 > $OUT/bench1.log 2>&1
echo "bench --device 1 rc=$? in $((SECONDS - t0))s"; grep -aE "ceilings|median" $OUT/bench1.log | head -4
