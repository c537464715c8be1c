# Call 9: the decode-split kernel's weight copies evict-first (this tree)
# against a4d2479's kernels (.ab_kernels), DeepSeek-V3 and Kimi-K2 T=1,
# three rounds of 20 repeats; GpuFusedMoe.DecodeSplit and GpuTrace.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 100 ctest -L gpu -R "GpuFusedMoe.DecodeSplit|GpuTrace" --timeout 90 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
AB_ROUNDS=3 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" timeout 200 scripts/device_check.sh ab:fused_moe:deepseek-v3-T1 ab:fused_moe:kimi-k2-T1 >> $OUT/main.log 2>&1
for f in $OUT/ab_*.log; do echo "== $f"; grep -hE "###|^\[|    experts |    gate_up |    down |WRONG" $f | cut -c1-100; done
cd $O && tar czf logs.tgz l
