# Session 38 call 2: the random-shape GPU tests again after call 1's
# findings (per-dtype tolerance for the layer's bf16, subnormal steps in the
# float64 bounds; no kernel change), on the default seed and one more; then
# CTA pairs with multicast weights on the L2-bound Qwen3 GEMMs (call 1's
# ncu: down 91% of L2 throughput, gate/up 82%), each against the defaults in
# one process.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
for seed in 20261202 7; do
  (cd $B && TILECRAFT_SHAPE_SEED=$seed timeout 300 ctest -L gpu -j 3 --output-on-failure -R "GpuRandomShapes") > $OUT/gpu_tests_$seed.log 2>&1
  echo "random-shape tests, seed $seed: rc=$?"; grep -E "tests passed|\*\*\*|Timeout" $OUT/gpu_tests_$seed.log | head -8
  grep -E "^(fused_moe|moe_grouped_gemm) / " $OUT/gpu_tests_$seed.log | cut -c1-330 | head -12
done
. scripts/vs_bench.sh
vs mc_down_qwen30 qwen3-30b-a3b-T4096 experts,down down_cluster=2,down_multicast=1
vs mc_gu_qwen30 qwen3-30b-a3b-T4096 experts,gate_up gate_up_cluster=2,gate_up_multicast=1
vs mc_down_qwen235 qwen3-235b-a22b-T4096 experts,down down_cluster=2,down_multicast=1
vs mc_down_race2 race-performance-2 experts,down down_cluster=2,down_multicast=1
cd $O && tar czf logs.tgz l
