# Session 31 call 1: session 30's prepared call (Cli.BenchScopesFilter with
# `--scopes main`; Qwen3-30B T=1 main-line stamps with and without the
# preload / carveout), then the consumer lookahead (8b499f1: the next unit's
# tile found during the last k-step) against 88cb655's kernels.
export O=$OUT; mkdir -p $O/l
OUT=$O bash docs/measurements/2026-12-01-h200-session31/calls/call1_prepared.sh > $O/l/prepared.log 2>&1
rm -f $O/logs.tgz; export OUT=$O/l
grep -E "rc=|^\[|t0 " $OUT/prepared.log | cut -c1-150
export OP_TIMEOUT=90 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only,experts"
for w in race-performance-2 race-performance-1 mixtral-8x7b-T4096 qwen3-30b-a3b-T4096 deepseek-v3-T4096; do
  timeout 150 scripts/device_check.sh ab:fused_moe:$w >> $OUT/main.log 2>&1
  grep -E "^###|experts |down |gate_up |kernel_only |WRONG|TIMED|rror" $OUT/ab_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
cd $O && tar czf logs.tgz l
