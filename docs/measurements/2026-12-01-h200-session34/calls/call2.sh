# Session 34 call 2: branch wip/producer-sleep (only the ws GEMM producer's
# empty-slot waits suspend; call 1's every-wait hint cost DS-V3 T=4096 ~1%
# but cut race 2 gate/up J/call ~4%) against main's kernels (.ab_kernels).
grep -q "mbar_wait_suspend" kernels/tile/mbarrier.cuh || { echo "not on wip/producer-sleep"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export OP_TIMEOUT=100 AB_ROUNDS=4
BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only --energy-ms 1500" \
  timeout 260 scripts/device_check.sh ab:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
export AB_ROUNDS=2
BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes kernel_only --energy-ms 1500" \
  timeout 120 scripts/device_check.sh ab:fused_moe:mixtral-8x7b-T4096 >> $OUT/main.log 2>&1
BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,experts" \
  timeout 120 scripts/device_check.sh ab:fused_moe:deepseek-v3-T4096 >> $OUT/main.log 2>&1
for w in race-performance-2 mixtral-8x7b-T4096 deepseek-v3-T4096; do
  grep -E "^###|gate_up |down |kernel_only |experts |energy |WRONG|TIMED|rror" $OUT/ab_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-150
done
cd $O && tar czf logs.tgz l
