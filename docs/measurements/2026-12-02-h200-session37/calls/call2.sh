# Session 37 call 2: call 1's aligned order slowed race 1's down projection
# 4% (its decode's look-back, up to 15 dependent loads per tile, on the
# consumers' way to their MMAs); now the publisher decodes each unit once,
# into the tile ring (kernel code first run here), with the look-back's loads
# in one round trip. The whole GPU suite; then the new kernels at
# group_align=0 against session 36's (.ab_kernels/5a5db12, carried: its
# kernels with this tree's params header) in one process; then group_align=3
# against 0 again.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 330 ctest -L gpu -j 3 --output-on-failure) > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; grep -E "tests passed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
for w in deepseek-v3-T4096 race-performance-2 race-performance-1; do
  timeout 100 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 \
    --scopes experts,gate_up,down --vs-kernels .ab_kernels/5a5db12 > $OUT/old_$w.log 2>&1
  echo "== old kernels vs new, $w: rc=$?"
  grep -E "WRONG|ERROR|^    [a-z_]+@vs +median" $OUT/old_$w.log | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g' | cut -c1-150
done
. scripts/vs_bench.sh
both=gate_up_group_align=3,down_group_align=3
vs align_ds4096_a deepseek-v3-T4096 experts,gate_up,down $both
vs align_ds4096_b deepseek-v3-T4096 experts,gate_up,down $both
vs align_race1 race-performance-1 experts,gate_up,down $both
vs align_mixtral4096 mixtral-8x7b-T4096 experts,gate_up,down $both
vs align_qwen30_4096 qwen3-30b-a3b-T4096 experts,down down_group_align=3
cd $O && tar czf logs.tgz l
