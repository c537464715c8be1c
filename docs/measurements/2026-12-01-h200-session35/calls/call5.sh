# Session 35 call 5 (main, lean keys on by default): a config sweep of the
# rows still off their targets, each alternative in one process against the
# defaults (bench --vs-config), so each ratio is free of the power state:
# Qwen3-30B T=4096 (600 target), DeepSeek-V3 T=4096 (7000) and T=512
# (5200), race 2 (faster than the cuBLAS loop).
#   run(command="bash docs/measurements/2026-12-01-h200-session35/calls/call5.sh")
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
Q=qwen3-30b-a3b-T4096; S=gate_up,down
i=0
for cfg in down_block_n=128 gate_up_block_m=64 down_block_m=64 group_m=1 group_m=4 group_m=16 half_skip=0 \
           persistent=1 gate_up_cluster=2 down_cluster=2 down_stages=3 gate_up_stages=3; do
  i=$((i+1)); vs qwen_$i $Q $S $cfg
done
D3=deepseek-v3-T4096
for cfg in down_block_n=128 group_m=4 group_m=16 gate_up_half_skip=0 down_cluster=2 \
           gate_up_cluster=2,gate_up_multicast=1; do
  i=$((i+1)); vs dsv3_$i $D3 $S $cfg
done
for cfg in gate_up_block_m=128 group_m=8 down_block_n=128; do
  i=$((i+1)); vs t512_$i deepseek-v3-T512 $S $cfg
done
for cfg in gate_up_group_m=4 gate_up_group_m=16 down_block_n=128 down_group_m=16 down_stages=3; do
  i=$((i+1)); vs race2_$i race-performance-2 $S $cfg
done
cd $O && tar czf logs.tgz l
