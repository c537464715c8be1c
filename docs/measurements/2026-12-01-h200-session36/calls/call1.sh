# Prepared in session 35 for the next session (on main; ~5 min). Each A/B in
# one process (bench --vs-config), as session 35's calls 4-7:
#   - DeepSeek-V3 T=4096: CTA pairs off together with one row tile at a time
#     (session 35 tried each alone: pairs off 1.094x, group_m=1 on pairs
#     1.015x); Kimi-K2 T=4096 with pairs (0.66 tiles per expert, outside
#     pairs_by_default's 0.75..1.25).
#   - the new group_m choice's edges: Qwen3-235B / Qwen3-30B at T=2048 and
#     T=8192 (1 and 4 tiles per expert) against groups of 8.
#   - ncu of race 2's lean gate/up (instructions per cycle beside session
#     33's 1.40 for ours and 0.47 for cuBLAS's gate).
# run(command="bash docs/measurements/2026-12-01-h200-session36/calls/call1.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
. scripts/vs_bench.sh
vs dsv3_nopairs_g1 deepseek-v3-T4096 gate_up gate_up_cluster=1,gate_up_half_skip=0,gate_up_group_m=1
vs kimi_pairs kimi-k2-T4096 gate_up gate_up_cluster=2,gate_up_half_skip=1
for t in 2048 8192; do  # (--shape: these T are not manifest workloads; the models' E, H, I, K)
  for m in "qwen235 E=128,H=4096,I=1536,K=8" "qwen30 E=128,H=2048,I=768,K=8"; do
    set -- $m
    timeout 100 $B/tilecraft bench --op fused_moe --shape "T=$t,$2,n_group=1,topk_group=1,dtype=bf16" --warmup 2 \
      --repeat 10 --trials 1 --scopes gate_up --vs-config gate_up_group_m=8 > $OUT/g8_$1_$t.log 2>&1
    echo "== $1 T=$t gate_up_group_m=8: rc=$?"; grep -E "WRONG|ERROR|@vs +median" $OUT/g8_$1_$t.log | cut -c1-150
  done
done
timeout 200 ncu --kernel-name regex:grouped_gemm_sm90_ws --launch-count 1 --section SpeedOfLight \
  --section InstructionStats $B/tilecraft bench --op fused_moe --workload race-performance-2 --warmup 0 --repeat 1 \
  --trials 1 --scopes gate_up > $OUT/ncu_race2.txt 2>&1; echo "ncu rc=$?"
grep -E "Compute \(SM\)|Executed Ipc|Issue Slots" $OUT/ncu_race2.txt | head
cd $O && tar czf logs.tgz l
