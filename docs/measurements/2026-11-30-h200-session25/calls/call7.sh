# Call 7: the router GEMM split (router_split) on top of call 6's kernels:
# the layer's GPU tests, the routing-tagged cases, and the routing scope
# with and without it (one binary).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1
(cd build-device && timeout 110 ctest -L gpu -R "GpuFusedMoe\.(SmokeCases|DeterministicBits|CudaGraph|DependentLaunch|HalfSkip|DefaultPairs)" -j 2 --timeout 100 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
timeout 60 build-device/tilecraft test --op fused_moe --tag routing > $OUT/routing_test.log 2>&1; tail -2 $OUT/routing_test.log
AB_ROUNDS=1 OP_TIMEOUT=25 BENCH_FLAGS="--warmup 1 --repeat 5 --trials 1" AB_CONFIGS=";router_split=0" timeout 100 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-router-T1 abcfg:fused_moe:deepseek-v3-router-T256 >> $OUT/main.log 2>&1
grep -hE "###|    routing |experts  |WRONG" $OUT/abcfg_*.log | cut -c1-70
cd $O && tar czf logs.tgz l
