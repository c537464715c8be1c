# Call 4: ping-pong consumers (pingpong=1), opt-in. GPU tests (the new
# PingPong ones and the shared-tile kernel's), then a config A/B against the
# defaults (both projections ping-pong; only the down projection) on the
# compute-bound rows and the T=4096 model rows.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 200 ctest -L gpu -R "PingPong|GpuMoeGroupedGemm.WarpSpecialisedKernel" --timeout 190 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed|Failure" $OUT/gpu.log | head -20
AB_ROUNDS=2 OP_TIMEOUT=60 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" AB_CONFIGS=";pingpong=1;down_pingpong=1" timeout 330 scripts/device_check.sh abcfg:fused_moe:race-performance-2 abcfg:fused_moe:mixtral-8x7b-T4096 abcfg:fused_moe:qwen3-30b-a3b-T4096 abcfg:fused_moe:deepseek-v3-T4096 abcfg:fused_moe:race-performance-1 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|^\[|    (kernel_only|gate_up|down|cublas_per_expert) |WRONG|rror" $f | cut -c1-110; done
cd $O && tar czf logs.tgz l
