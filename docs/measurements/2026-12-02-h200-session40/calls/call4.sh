# Session 40: the rows of the table not re-run with session 39's gemm_silu
# (main's kernels, the same as calls 1-2): DeepSeek-V3 T=1, 16, 512,
# Qwen3-30B T=1 and T=4096, Mixtral T=4096. Run from the repository root on
# the GPU machine.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device; G="--warmup 2 --repeat 10 --trials 1"
for w in deepseek-v3-T1 deepseek-v3-T16 deepseek-v3-T512 qwen3-30b-a3b-T1 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096; do
  timeout 80 $B/tilecraft bench --op fused_moe --workload $w $G > $OUT/$w.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    (experts|layer|kernel_only|cublas_per_expert|gate_up|down|mapping|combine) +median|WRONG|ceilings \(" $OUT/*.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
