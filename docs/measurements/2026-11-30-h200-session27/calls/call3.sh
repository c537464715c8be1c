# Call 3: decode_prefetch 1 (the default at Qwen3-30B T=1), 0 and 2 (the
# prefetched lines evict-last; its "down" stage alone is the canary: were
# lines left in L2 across calls, it would drop from ~14 us). Three rounds of
# 20 repeats; the decode-path GPU test.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
AB_ROUNDS=3 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_prefetch=0;decode_prefetch=2" timeout 240 scripts/device_check.sh abcfg:fused_moe:qwen3-30b-a3b-T1 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|^\[|    experts |    gate_up |    down |WRONG" $f | cut -c1-100; done
(cd build-device && timeout 100 ctest -L gpu -R "GpuFusedMoe.DecodePath" --timeout 90 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
cd $O && tar czf logs.tgz l
