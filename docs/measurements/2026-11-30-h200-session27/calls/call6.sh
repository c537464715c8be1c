# Call 6: the decode-split combine in the streaming kernel (default now)
# against decode_split_combine=0 (the separate kernel), DeepSeek-V3 and
# Kimi-K2 T=1, three rounds of 20 repeats; and this tree's kernels against
# a4d2479's (.ab_kernels), two rounds; GPU tests GpuFusedMoe and GpuTrace.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 200 ctest -L gpu -R "GpuFusedMoe|GpuTrace" -j 2 --timeout 190 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
AB_ROUNDS=3 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_split_combine=0" timeout 200 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T1 abcfg:fused_moe:kimi-k2-T1 >> $OUT/main.log 2>&1
AB_ROUNDS=2 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" timeout 100 scripts/device_check.sh ab:fused_moe:deepseek-v3-T1 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log $OUT/ab_*.log; do echo "== $f"; grep -hE "###|^\[|    experts |    gate_up |    down |WRONG" $f | cut -c1-100; done
cd $O && tar czf logs.tgz l
