# Session 30 call 3: every GPU test on the final kernels (the down
# projection's new register split and publish branch), the race cases
# against the golden, bench --scopes (CLI test, then the experts scope's
# trace at Qwen3-30B T=1), and the fused combine on two more models
# (experts scope only, two rounds).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "gpu_tests|Failed|FAILED" $OUT/main.log | head
(cd build-device && timeout 120 ctest -R "Cli.BenchScopesFilter" --output-on-failure > $OUT/cli_scopes.log 2>&1; echo "cli scopes rc=$?")
timeout 100 build-device/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"; tail -2 $OUT/race_test.log
timeout 60 build-device/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 --options release,trace --scopes experts \
  --warmup 2 --repeat 10 --trials 1 > $OUT/trace_qwen3_30b_t1_experts.log 2>&1; echo "trace rc=$?"
grep -E "median|slot  [0-9]:|^    trace" $OUT/trace_qwen3_30b_t1_experts.log | cut -c1-160
export OP_TIMEOUT=90 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes experts"
AB_CONFIGS=";fused_combine=1" scripts/device_check.sh abcfg:fused_moe:mixtral-8x7b-T4096 abcfg:fused_moe:qwen3-30b-a3b-T4096 >> $OUT/main.log 2>&1
grep -E "^###|experts |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_*.log | cut -c1-150
cd $O && tar czf logs.tgz l
