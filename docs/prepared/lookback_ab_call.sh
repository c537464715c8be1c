# Prepared by session 37 (not yet run): main's sequential look-back in the
# tile order against the one-round-trip form of calls 2-4
# (group_bound_parallel_loads.patch, applied to a copy of kernels/ in
# .ab_kernels/par; it spills 16 bytes only in a non-default pair form, not
# in DeepSeek-V3's kernels), in one process each (ratio: the patched
# kernels' time over main's), two processes on DeepSeek-V3 T=4096, one on
# race 1. Run from the repository root on the GPU machine.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
rm -rf .ab_kernels/par && mkdir -p .ab_kernels/par && cp -r kernels/. .ab_kernels/par/
(cd .ab_kernels/par && patch -p2 < ../../docs/prepared/group_bound_parallel_loads.patch) > $OUT/patch.log 2>&1
echo "patch rc=$?"
for run in ds_a:deepseek-v3-T4096 ds_b:deepseek-v3-T4096 race1:race-performance-1; do
  name=${run%%:*} w=${run#*:}
  timeout 120 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 \
    --scopes experts,gate_up,down --vs-kernels .ab_kernels/par > $OUT/lookback_$name.log 2>&1
  echo "== $name ($w): rc=$?"
  grep -E "WRONG|ERROR|^    [a-z_]+@vs +median" $OUT/lookback_$name.log | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g' | cut -c1-150
done
cd $O && tar czf logs.tgz l
