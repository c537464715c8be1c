# Session 35 call 6 (main): call 5's one lead, gate_up_group_m=1 (Qwen3-30B
# T=4096 gate/up 0.979x), re-read on the rows with one to eight row tiles
# per expert, each in one process against the defaults.
#   run(command="bash docs/measurements/2026-12-01-h200-session35/calls/call6.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
vs() {  # vs LOGNAME WORKLOAD SCOPES CONFIG
  local name=$1 w=$2 scopes=$3 cfg=$4
  timeout 100 $B/tilecraft bench --op fused_moe --workload "$w" --warmup 2 --repeat 10 --trials 1 \
    --scopes "$scopes" --vs-config "$cfg" > $OUT/$name.log 2>&1
  echo "== $name ($w, --vs-config $cfg): rc=$?"
  grep -E "WRONG|ERROR|^    [a-z_]+@vs +median" $OUT/$name.log | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g' | cut -c1-150
}
i=0
for w in qwen3-30b-a3b-T4096 qwen3-30b-a3b-T4096 qwen3-235b-a22b-T4096 kimi-k2-T4096 mixtral-8x7b-T512 \
         deepseek-v3-T4096 qwen3-30b-a3b-T16384; do
  i=$((i+1)); vs g1_$i $w gate_up gate_up_group_m=1
done
cd $O && tar czf logs.tgz l
