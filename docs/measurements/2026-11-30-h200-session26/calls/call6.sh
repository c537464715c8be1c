# Call 6 (tree as call 5): does the down-box pool (decode_split_pool) move
# work off the slow SMs? Per-CTA traces with SM ids at pools 0, 8, 32, and
# the experts scope under each, two rounds (DeepSeek-V3 T=1).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
for p in 0 8 32; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-T1 --warmup 2 --repeat 3 --trials 1 --options release,trace --config decode_split_pool=$p > $OUT/trace_pool$p.log 2>&1; echo "trace pool $p rc=$?"
done
AB_ROUNDS=2 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_split_pool=8;decode_split_pool=32" timeout 150 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T1 >> $OUT/main.log 2>&1
grep -hE "###|    experts |WRONG" $OUT/abcfg_*.log | cut -c1-70
cd $O && tar czf logs.tgz l
