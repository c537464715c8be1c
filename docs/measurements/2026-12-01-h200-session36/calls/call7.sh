# Session 36 call 7: call 4's mixed reading on Qwen3-30B T=4096 (gate/up
# 1.007x and down 1.015x for every row stored, yet experts 0.996x) again,
# with twice the rounds, beside Qwen3-235B T=4096 and Mixtral T=512; each
# in one process, every row stored against fill_stores.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
for w in qwen3-30b-a3b-T4096 qwen3-235b-a22b-T4096 mixtral-8x7b-T512; do
  for round in 1 2; do
    timeout 100 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 20 --trials 1 \
      --scopes experts,gate_up,down --vs-config gate_up_fill_stores=0,down_fill_stores=0 > $OUT/fill_${w}_$round.log 2>&1
    echo "== $w round $round: rc=$?"
    grep -E "WRONG|ERROR|^    [a-z_]+@vs +median" $OUT/fill_${w}_$round.log | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g'
  done
done
cd $O && tar czf logs.tgz l
