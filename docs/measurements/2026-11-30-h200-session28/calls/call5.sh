# Call 5: call 4 again with the ping-pong wgmma groups branch-free (call 4's
# kernel had a branch per 64-row half inside each group, and ptxas
# serialised its wgmmas: C7520). GPU tests, then the config A/B.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 150 ctest -L gpu -R "PingPong" --timeout 140 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed|Failure" $OUT/gpu.log | head -20
AB_ROUNDS=2 OP_TIMEOUT=60 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" AB_CONFIGS=";pingpong=1;down_pingpong=1" timeout 300 scripts/device_check.sh abcfg:fused_moe:race-performance-2 abcfg:fused_moe:mixtral-8x7b-T4096 abcfg:fused_moe:qwen3-30b-a3b-T4096 abcfg:fused_moe:race-performance-1 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    (kernel_only|gate_up|down|cublas_per_expert) |WRONG|rror" $f | cut -c1-72; done
cd $O && tar czf logs.tgz l
