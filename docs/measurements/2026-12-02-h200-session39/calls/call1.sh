# Session 39 call 1: (a) the random-shape GPU tests on main 4c0765b (the
# gate's near-tie group check, check_case_fits, output_sha256 and
# LayersAreDeterministic are new since session 38's call 3); (b) session 38's
# prepared comparison: our gate/up against torch._grouped_mm (CUTLASS) on
# Mixtral T=4096 and Qwen3-30B T=4096 shapes, and ncu of both on Mixtral.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 260 ctest -L gpu -j 5 -R GpuRandomShapes --output-on-failure) > $OUT/random.log 2>&1
echo "random rc=$?"; grep -E "tests passed|Passed|Failed|\*\*\*" $OUT/random.log | cut -c1-140
for w in mixtral-8x7b-T4096 qwen3-30b-a3b-T4096; do
  timeout 60 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 --scopes gate_up \
    > $OUT/ours_$w.log 2>&1; echo "$w rc=$?"; grep -E "^    gate_up |ceilings" $OUT/ours_$w.log | cut -c1-160
done
timeout 90 python3 scripts/torch_grouped_mm_bench.py --shape 8,1024,28672,4096 --shape 128,256,1536,2048 \
  --shape 8,16384,4096,7168 > $OUT/torch.log 2>&1; echo "torch rc=$?"; tail -5 $OUT/torch.log
timeout 100 ncu --section SpeedOfLight --section LaunchStats --kernel-name-base demangled \
  --kernel-name "regex:grouped_gemm_sm90_ws_kernel<__nv_bfloat16" --launch-count 1 \
  $B/tilecraft bench --op fused_moe --workload mixtral-8x7b-T4096 --warmup 0 --repeat 1 --trials 1 --scopes gate_up \
  > $OUT/ncu_ours.txt 2>&1; echo "ncu ours rc=$?"
timeout 100 ncu --section SpeedOfLight --section LaunchStats --kernel-name-base demangled \
  --kernel-name "regex:cutlass|Gemm|gemm" --launch-count 1 \
  python3 scripts/torch_grouped_mm_bench.py --shape 8,1024,28672,4096 --repeat 1 > $OUT/ncu_torch.txt 2>&1
echo "ncu torch rc=$?"
grep -hE "^  [a-zA-Z_].*\(|Throughput|Duration|SM Frequency|Registers|Shared Memory Config|Block Size|Grid Size|Cluster" \
  $OUT/ncu_ours.txt $OUT/ncu_torch.txt | cut -c1-300 | head -50
cd $O && tar czf logs.tgz l
