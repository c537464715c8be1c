# Call 10: the warp-specialised GEMM's weight boxes evict-first (this tree,
# uncommitted) against main's kernels (.ab_kernels = HEAD), two rounds,
# DeepSeek-V3 / Qwen3-30B / Mixtral T=4096; the ws GPU tests.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 150 ctest -L gpu -R "WarpSpecialised|CtaPairs" --timeout 140 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
AB_ROUNDS=2 OP_TIMEOUT=60 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" timeout 240 scripts/device_check.sh ab:fused_moe:deepseek-v3-T4096 ab:fused_moe:qwen3-30b-a3b-T4096 ab:fused_moe:mixtral-8x7b-T4096 >> $OUT/main.log 2>&1
for f in $OUT/ab_*.log; do echo "== $f"; grep -hE "###|^\[|    experts |    gate_up |    down |WRONG|clock" $f | cut -c1-100; done
cd $O && tar czf logs.tgz l
