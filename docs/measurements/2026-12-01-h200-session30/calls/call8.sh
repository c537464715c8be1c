# Session 30 call 8: does the preload cost the layer (main line) anything?
# Qwen3-30B T=1 with every scope (as the tables run it), preload on (the
# default) against down_preload=0, three rounds; DeepSeek-V3 T=1 once each
# as a control (the preload does not apply there).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export OP_TIMEOUT=60 AB_ROUNDS=3 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1"
AB_CONFIGS=";down_preload=0" scripts/device_check.sh abcfg:fused_moe:qwen3-30b-a3b-T1 >> $OUT/main.log 2>&1
grep -E "^###|^\[|    gate_up |    down |    experts |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_qwen3-30b-a3b-T1.log | sed -E 's/ +\(.*//; s/ \[cuda\].*median/ median/' | cut -c1-120
cd $O && tar czf logs.tgz l
