# Session 37 call 5 (final kernels: the publisher writes decoded tiles into
# the ring slot in shared memory, ranks unrolled, the look-back's loads one
# after another; the ring and group_align only on the warp-specialised
# kernel with TMA weights, so the all-cp.async form and the mma.sync kernels
# compile their old fixed-group code; no spills in any CPU compile test).
# The GPU tests of every kernel form that walks the order, the race's tests,
# and DeepSeek-V3 T=4096 / race 2 / Qwen3-30B T=4096 once more.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 240 ctest -L gpu -j 4 --output-on-failure \
  -R "AlignedGroups|CtaPairs|WarpSpecialisedKernel|PersistentWarpSpecialised|FillStores|GpuFusedMoe|EveryCtaOrder|LeanKeys") \
  > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"; grep -E "tests passed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
timeout 100 $B/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"; tail -1 $OUT/race_test.log
: > $OUT/model.log
for w in deepseek-v3-T4096 race-performance-2 qwen3-30b-a3b-T4096; do
  timeout 60 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/model.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG|ceilings \(" $OUT/model.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
