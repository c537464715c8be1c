# Session 34 call 5 (main): bench --vs-config on the GPU (its test), then
# an A/A in one process on race 2 (persistent=2 is the default, so both
# sides run the same kernels): how close to 1.000 the ratio stays when both
# sides share every round's clock and power state (calls 1-4: separate
# processes of the same kernels spread 2.1-2.5 ms).
grep -q "vs_config" src/harness/runner.cpp || { echo "not main with --vs-config"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 60 ctest -R "Cli.BenchVsConfig|Cli.BenchEnergyPerScope" --output-on-failure) > $OUT/vs_tests.log 2>&1
grep -E "tests passed|tests failed|Failure" $OUT/vs_tests.log | head -5
for i in 1 2; do
  timeout 45 build-device/tilecraft bench --op fused_moe --workload race-performance-2 --warmup 2 --repeat 10 \
    --trials 1 --scopes kernel_only --vs-config persistent=2 > $OUT/race2_aa$i.log 2>&1
  grep -E "held back|kernel_only|main@vs|vs-config" $OUT/race2_aa$i.log | sed -E 's/ +\(.*//' | cut -c1-160
done
cd $O && tar czf logs.tgz l
