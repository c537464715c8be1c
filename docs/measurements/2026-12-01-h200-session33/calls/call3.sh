# Session 33, call 3 (branch wip/consumer-addr: the consumers take shared
# addresses once and a warp-uniform warpgroup index; the proxy fence skipped
# after TMA-only stages). The full GPU suite on it, then a kernel A/B against
# main's kernels (.ab_kernels/b2f2bb7c92 from scripts/kernel_ab.sh main) on
# race 2 and DeepSeek-V3 T=4096, three rounds.
#   run(command="bash docs/measurements/2026-12-01-h200-session33/calls/call3.sh", carry=[".ab_kernels"])
grep -q "full_at + 8 \* s" kernels/moe/grouped_gemm_sm90_ws.cuh || { echo "not on wip/consumer-addr"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 timeout 250 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "^== gpu" $OUT/main.log
grep -E "Failed|FAILED" $OUT/gpu_tests.log | head
export OP_TIMEOUT=90 AB_ROUNDS=3 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only"
for w in race-performance-2 deepseek-v3-T4096; do
  timeout 200 scripts/device_check.sh ab:fused_moe:$w >> $OUT/main.log 2>&1
  grep -E "^###|gate_up |down |kernel_only |WRONG|TIMED|rror" $OUT/ab_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
cd $O && tar czf logs.tgz l
