# Session 30 call 11: is the preload's layer loss (call 8) the SMs'
# L1 / shared-memory reconfiguration? Qwen3-30B T=1, every scope, two
# rounds: default, down_preload=1, down_preload=1 carveout=1, carveout=1.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export OP_TIMEOUT=30 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1"
AB_CONFIGS=";down_preload=1;down_preload=1 carveout=1;carveout=1" scripts/device_check.sh abcfg:fused_moe:qwen3-30b-a3b-T1 >> $OUT/main.log 2>&1
grep -E "^###|^\[|    down |    experts |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_qwen3-30b-a3b-T1.log | sed -E 's/ +\(.*//; s/ \[cuda\].*median/ median/' | cut -c1-120
cd $O && tar czf logs.tgz l
