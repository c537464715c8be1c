# Session 38 call 4: the tile order's look-back loads in one round trip
# (five scalars in gemm_group_bound, kernels/moe/tile_order.cuh; spill-free
# in every CPU compile test, unlike session 37's array form). GPU tests of
# every path that runs it (group_align > 0) and the race's tests, then the
# new kernels against main's sequential look-back (.ab_kernels/seq, carried)
# in one process: ratio = sequential time / one-round-trip time.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 200 ctest -L gpu -j 4 --output-on-failure -R "AlignedGroups|GpuFusedMoe") > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; grep -E "tests passed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -8
timeout 120 $B/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"; tail -1 $OUT/race_test.log
for run in ds_a:deepseek-v3-T4096 ds_b:deepseek-v3-T4096 race2:race-performance-2; do
  name=${run%%:*} w=${run#*:}
  timeout 100 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 \
    --scopes experts,gate_up,down --vs-kernels .ab_kernels/seq > $OUT/lookback_$name.log 2>&1
  echo "== sequential look-back vs one round trip, $name ($w): rc=$?"
  grep -E "WRONG|ERROR|^    [a-z_]+@vs +median" $OUT/lookback_$name.log | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g' | cut -c1-150
done
cd $O && tar czf logs.tgz l
