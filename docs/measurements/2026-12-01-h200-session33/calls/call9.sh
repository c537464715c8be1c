# Session 33, call 9 (main): the new GPU-state fields and bench --energy-ms
# on the device (their tests), then race 2's kernels against cuBLAS's loop
# in joules per call, each alone.
#   run(command="bash docs/measurements/2026-12-01-h200-session33/calls/call9.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
grep -i power $OUT/env.txt
timeout 60 build-device/tests/tilecraft_gpu_tests --gtest_filter='GpuRuntime.ClockAndPowerCountersReadable' > $OUT/tests.log 2>&1; echo "gpu test rc=$?"
timeout 90 build-device/tests/tilecraft_cpu_tests --gtest_filter='Cli.BenchEnergyPerScope' >> $OUT/tests.log 2>&1; echo "cli test rc=$?"
grep -aE "^\[  (PASSED|FAILED) |Failure|GPU over" $OUT/tests.log | cut -c1-200
timeout 120 build-device/tilecraft bench --op fused_moe --workload race-performance-2 --warmup 2 --repeat 10 --trials 1 \
  --scopes gate_up,down,kernel_only,cublas_per_expert --energy-ms 1500 > $OUT/energy.log 2>&1; echo "energy rc=$?"
grep -E "GPU over|    gate_up |    down |    kernel_only |    cublas_per_expert |energy " $OUT/energy.log | sed -E 's/  \(.*\)$//' | cut -c1-220
cd $O && tar czf logs.tgz l
