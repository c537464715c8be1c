# Call 7 (tree as call 5): the down-box pool as a default? Experts scope at
# pools 0 (the default), 4 and 8, three rounds of 20 repeats, DeepSeek-V3 and
# Kimi-K2 T=1; and the decode-split GPU test (pools 0, 1, 15 bitwise).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
AB_ROUNDS=3 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_split_pool=8;decode_split_pool=4" timeout 200 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T1 abcfg:fused_moe:kimi-k2-T1 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    experts |WRONG" $f | cut -c1-70; done
(cd build-device && timeout 120 ctest -L gpu -R "DecodeSplit" --timeout 110 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
cd $O && tar czf logs.tgz l
