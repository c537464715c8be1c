# Session 40 (prepared by session 39; ~5 device-minutes): what the new
# gemm_silu (no IEEE division) gives where session 39 did not measure it:
# the race's four cases and their cuBLAS loop ratios (race 2 was 1.05),
# DeepSeek-V3 T=4096, the Qwen3-30B gate/up GEMM on unit and wide values
# (the wide one should time the same), and Qwen3-30B's down projection on
# multicast pairs (session 38: 1.116x slower) in one process.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device; G="--warmup 2 --repeat 10 --trials 1"
timeout 100 $B/tilecraft bench --op fused_moe --tag race $G > $OUT/race.log 2>&1; echo "race rc=$?"
timeout 40 $B/tilecraft bench --op fused_moe --workload deepseek-v3-T4096 $G > $OUT/dsv3.log 2>&1; echo "dsv3 rc=$?"
for w in qwen3-30b-a3b-t4096-gateup qwen3-30b-a3b-t4096-gateup-wide; do
  timeout 60 $B/tilecraft bench --op moe_grouped_gemm --variant SiluUp --workload $w $G > $OUT/$w.log 2>&1; echo "$w rc=$?"
done
timeout 60 $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T4096 $G --scopes down \
  --vs-config down_cluster=2,down_multicast=1 > $OUT/qwen_down_pairs.log 2>&1; echo "pairs rc=$?"
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |    down|WRONG|ceilings \(" $OUT/*.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
