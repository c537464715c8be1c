# Session 38 call 1: the new random-shape GPU tests (layers and grouped GEMMs
# of seeded random shapes against their goldens, tests/random_shapes.cpp);
# session 37's prepared look-back A/B; the gate/up CTA order (group_m=1) on
# the layers with ~2-8 row tiles per expert; ncu SpeedOfLight of Qwen3-30B
# T=4096's two GEMMs (is it L2-bound, as its half tiles' cost suggests?).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 300 ctest -L gpu -j 3 --output-on-failure -R "GpuRandomShapes") > $OUT/gpu_tests.log 2>&1
echo "random-shape tests rc=$?"; grep -E "tests passed|Failed|\*\*\*|Timeout|Test +#" $OUT/gpu_tests.log | head -20
grep -E "Failure|fused_moe / |moe_grouped_gemm / " $OUT/gpu_tests.log | cut -c1-400 | head -20
. scripts/vs_bench.sh
vs gm1_qwen30_4096 qwen3-30b-a3b-T4096 experts,gate_up gate_up_group_m=1
vs gm1_qwen235_4096 qwen3-235b-a22b-T4096 experts,gate_up gate_up_group_m=1
vs gm1_qwen30_16384 qwen3-30b-a3b-T16384 experts,gate_up gate_up_group_m=1
rm -rf .ab_kernels/par && mkdir -p .ab_kernels/par && cp -r kernels/. .ab_kernels/par/
(cd .ab_kernels/par && patch -p2 < ../../docs/prepared/group_bound_parallel_loads.patch) > $OUT/patch.log 2>&1
echo "patch rc=$?"
for run in ds_a:deepseek-v3-T4096 ds_b:deepseek-v3-T4096 race1:race-performance-1; do
  name=${run%%:*} w=${run#*:}
  timeout 120 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 \
    --scopes experts,gate_up,down --vs-kernels .ab_kernels/par > $OUT/lookback_$name.log 2>&1
  echo "== lookback $name ($w): rc=$?"
  grep -E "WRONG|ERROR|^    [a-z_]+@vs +median" $OUT/lookback_$name.log | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g' | cut -c1-150
done
timeout 150 ncu --kernel-name-base demangled --kernel-name "regex:grouped_gemm_sm90_ws_kernel<__nv_bfloat16" \
  --launch-count 2 --section SpeedOfLight --metrics lts__t_bytes.sum,dram__bytes_read.sum \
  $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T4096 --warmup 0 --repeat 1 --trials 1 --scopes kernel_only \
  > $OUT/ncu_qwen30_4096.txt 2>&1; echo "ncu rc=$?"
grep -E "ws_kernel<|Throughput|Duration|lts__t_bytes|dram__bytes|SM Frequency" $OUT/ncu_qwen30_4096.txt | sed -E 's/\(GroupedGemm.*//' | cut -c1-120 | head -30
cd $O && tar czf logs.tgz l
