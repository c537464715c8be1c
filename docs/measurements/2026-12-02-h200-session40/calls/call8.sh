# Session 40: sweeps in one process each (several --vs-config sides):
# Qwen3-30B T=1's decode kernels (experts 28.1 against the 25 target) and
# the mapping's block count at Qwen3-30B T=4096 (mapping 14 us, 32 blocks).
# Run from the repository root on the GPU machine.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device; G="--warmup 2 --repeat 20 --trials 1"
timeout 150 $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 $G --scopes experts,gate_up,down \
  --vs-config gate_up_block_n=16 down_block_n=8 gate_up_bulk=1 gate_up_block_n=16,down_block_n=8 > $OUT/t1_sweep.log 2>&1
echo "== T=1 sweep rc=$?"
grep -E "WRONG|ERROR|^    (experts|gate_up|down)(@vs[0-9])? +median" $OUT/t1_sweep.log | sed -E 's/ +\(.*//' | cut -c1-120
timeout 150 $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T4096 $G --scopes mapping,experts \
  --vs-config mapping_blocks=8 mapping_blocks=16 mapping_blocks=64 > $OUT/mapping_sweep.log 2>&1
echo "== mapping sweep rc=$?"
grep -E "WRONG|ERROR|^    (mapping|experts)(@vs[0-9])? +median" $OUT/mapping_sweep.log | sed -E 's/ +\(.*//' | cut -c1-120
cd $O && tar czf logs.tgz l
