# Session 33, call 6 (main 8b48f3e against session 32's kernels b2f2bb7 in
# .ab_kernels: scripts/kernel_ab.sh b2f2bb7): call 3's consumer change on
# race 1, Mixtral and Qwen3-30B T=4096, two rounds each.
#   run(command="bash docs/measurements/2026-12-01-h200-session33/calls/call6.sh", carry=[".ab_kernels"])
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export OP_TIMEOUT=90 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only"
for w in race-performance-1 mixtral-8x7b-T4096 qwen3-30b-a3b-T4096; do
  timeout 130 scripts/device_check.sh ab:fused_moe:$w >> $OUT/main.log 2>&1
  grep -E "^###|gate_up |down |kernel_only |WRONG|TIMED|rror" $OUT/ab_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
cd $O && tar czf logs.tgz l
