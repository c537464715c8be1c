# Call 4: the decode-split combine with its slots read before the grid wait
# (this tree) against a4d2479's kernels (.ab_kernels), DeepSeek-V3 and Kimi-K2
# T=1, three rounds of 20 repeats; GpuFusedMoe.DecodeSplit; then ncu of
# DeepSeek-V3 T=4096's two grouped GEMMs (DRAM bytes against the weights).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 120 ctest -L gpu -R "GpuFusedMoe.DecodeSplit" --timeout 110 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
AB_ROUNDS=3 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" timeout 260 scripts/device_check.sh ab:fused_moe:deepseek-v3-T1 ab:fused_moe:kimi-k2-T1 >> $OUT/main.log 2>&1
for f in $OUT/ab_*.log; do echo "== $f"; grep -hE "###|^\[|    experts |    down |WRONG" $f | cut -c1-100; done
NCU_KERNELS=grouped_gemm_sm90_ws NCU_SKIP=1 NCU_COUNT=2 OP_TIMEOUT=150 timeout 160 scripts/device_check.sh ncu:fused_moe:deepseek-v3-T4096 >> $OUT/main.log 2>&1
grep -E "grouped_gemm|Duration|dram__bytes|lts__t_thr|Hit Rate|L2 Cache Throughput|DRAM Throughput|Compute \(SM\)" $OUT/ncu_*.txt | head -30
cd $O && tar czf logs.tgz l
