# Session 34 call 3: branch wip/stagger (config key stagger=N: consumer
# warpgroup 1 starts N k-steps behind warpgroup 0, so each one's epilogue can
# run under the other's MMAs; default 0 = main's kernels, kernel_code_diff
# 18/18 identical). GPU tests of the new key, then abcfg on the
# compute-bound rows (race 2, Qwen3-30B T=4096's short-K down, Mixtral).
grep -q "STAGGER" kernels/moe/grouped_gemm_sm90_ws.cuh || { echo "not on wip/stagger"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 200 ctest -L gpu -R "StaggeredConsumers|WarpSpecialisedKernel" -j 2 --output-on-failure) > $OUT/stagger_tests.log 2>&1
grep -E "tests passed|tests failed|Failure" $OUT/stagger_tests.log | head -8
export OP_TIMEOUT=150 AB_ROUNDS=3
AB_CONFIGS=";stagger=2;stagger=3" BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only" \
  timeout 200 scripts/device_check.sh abcfg:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
export AB_ROUNDS=2
AB_CONFIGS=";stagger=2;stagger=3" BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only" \
  timeout 100 scripts/device_check.sh abcfg:fused_moe:qwen3-30b-a3b-T4096 >> $OUT/main.log 2>&1
AB_CONFIGS=";stagger=2" BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only" \
  timeout 100 scripts/device_check.sh abcfg:fused_moe:mixtral-8x7b-T4096 >> $OUT/main.log 2>&1
for w in race-performance-2 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096; do
  grep -E "^###|gate_up |down |kernel_only |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-150
done
cd $O && tar czf logs.tgz l
