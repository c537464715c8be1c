# Session 40 (prepared by session 39; ~6 device-minutes): gemm_silu's
# exponential by ex2.approx of a shifted argument (silu_ex2.patch, applied
# to a copy of kernels/ in .ab_kernels/ex2; 3448 static instructions in the
# Qwen3-30B / Mixtral gate/up kernel against main's 3640 and the old
# division's 4232, which cost ~10% of Qwen3-30B's gate/up) against main's
# accurate expf, in one process (ratio: the patched kernels' time over
# main's); the GPU tests of every gated path under the patched kernels; and
# the consumers' stagger (session 34: no win with the old epilogue) on
# Qwen3-30B's gate/up and down, where the epilogue weighs most (32 and 12
# k-steps a tile).
# Run from the repository root on the GPU machine.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device; G="--warmup 2 --repeat 10 --trials 1"
rm -rf .ab_kernels/ex2 && mkdir -p .ab_kernels/ex2 && cp -r kernels/. .ab_kernels/ex2/
(cd .ab_kernels/ex2 && patch -p2 < ../../docs/prepared/silu_ex2.patch) > $OUT/patch.log 2>&1; echo "patch rc=$?"
(cd $B && TILECRAFT_KERNEL_DIR=$PWD/../.ab_kernels/ex2 timeout 300 ctest -L gpu -j 6 \
  -R "GpuMoeGroupedGemm|GpuFusedMoe" --output-on-failure) > $OUT/gpu_ex2.log 2>&1
echo "gpu (patched) rc=$?"; grep -E "tests passed|tests failed|\*\*\*Failed" $OUT/gpu_ex2.log | head
for w in qwen3-30b-a3b-T4096 mixtral-8x7b-T4096 race-performance-2; do
  timeout 90 $B/tilecraft bench --op fused_moe --workload $w $G --scopes experts,gate_up \
    --vs-kernels .ab_kernels/ex2 > $OUT/ex2_$w.log 2>&1; echo "== $w rc=$?"
  grep -E "WRONG|ERROR|^    [a-z_]+(@vs)? +median" $OUT/ex2_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
timeout 60 $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T4096 $G --scopes gate_up,down \
  --vs-config gate_up_stagger=2,down_stagger=2 > $OUT/stagger.log 2>&1; echo "stagger rc=$?"
grep -E "WRONG|^    (gate_up|down)(@vs)? +median" $OUT/stagger.log | sed -E 's/ +\(.*//'
cd $O && tar czf logs.tgz l
