# Call 8 (tree: decode_split_pool defaults to an eighth of the boxes): the
# layer's GPU tests, and the experts scope default against pool 0 (DeepSeek-V3 T=1).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 140 ctest -L gpu -R "GpuFusedMoe" -j 2 --timeout 130 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
AB_ROUNDS=2 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_split_pool=0" timeout 60 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T1 >> $OUT/main.log 2>&1
grep -hE "###|    experts |WRONG|^\[" $OUT/abcfg_*.log | cut -c1-110
cd $O && tar czf logs.tgz l
