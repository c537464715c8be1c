# Session 32 call 5 (main): Qwen3-30B T=1's decode alternatives again under
# the two-pass flush (session 31: the old flush had flattered some choices;
# the preload default flipped from a win to a loss under the new one). The
# one-kernel path (decode_split 1 and 2, two slice widths) and the bulk
# gate/up against the default two launches; three rounds, experts + main.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export OP_TIMEOUT=100 AB_ROUNDS=3 BENCH_FLAGS="--warmup 2 --repeat 30 --trials 1 --scopes experts"
export AB_CONFIGS=";decode_split=1;decode_split=2;decode_split=2,decode_split_cols=64;gate_up_bulk=1"
for w in qwen3-30b-a3b-T1 qwen3-235b-a22b-T1; do
  timeout 240 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
  grep -E "^###|^\[|experts |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
cd $O && tar czf logs.tgz l
