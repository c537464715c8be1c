# Session 30 call 5: the experts scope's own trace at Qwen3-30B T=1 (bench
# now re-runs the last --scopes scope after the check, L2 flushed, when
# tracing), and the GPU CLI test of --scopes again.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 120 ctest -R "Cli.BenchScopesFilter" --output-on-failure > $OUT/cli_scopes.log 2>&1; echo "cli scopes rc=$?")
for s in experts gate_up down; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 --options release,trace --scopes $s \
    --warmup 2 --repeat 10 --trials 1 > $OUT/trace_qwen3_30b_t1_$s.log 2>&1; echo "trace $s rc=$?"
  grep -E "median|slot  [0-9]:|^    trace" $OUT/trace_qwen3_30b_t1_$s.log | sed 's/(its last launch, //' | cut -c1-60,150-230
done
cd $O && tar czf logs.tgz l
