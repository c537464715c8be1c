# Call 2: group_m=1 (all column tiles of one row tile in a row) on the
# shapes with about one row tile per expert, and where race 2's down
# projection stalls, per SASS instruction (epilogue against mainloop).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export AB_ROUNDS=2 OP_TIMEOUT=60 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1"
export AB_CONFIGS=";group_m=1;down_group_m=1 down_block_n=128"
for w in deepseek-v3-T64 deepseek-v3-T512 kimi-k2-T512 deepseek-v3-T4096 qwen3-30b-a3b-T4096 mixtral-8x7b-T512; do
  timeout 100 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
done
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    (experts|gate_up|down) |WRONG|rror" $f | cut -c1-70; done
NCU_SKIP=2 NCU_LINES=40 OP_TIMEOUT=150 timeout 160 scripts/device_check.sh ncusrc:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
head -60 $OUT/ncusrc_fused_moe_race-performance-2.top.txt
cd $O && tar czf logs.tgz l
