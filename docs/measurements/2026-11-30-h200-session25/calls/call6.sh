# Call 6: the final kernels (token-by-token placing in the gate+mapping
# kernel on top of call 5's tree): the full GPU suite, the race test, and
# the routing A/B against 77703cc (.ab_kernels).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1
(cd build-device && timeout 300 ctest -L gpu -j 2 --timeout 250 --output-on-failure) > $OUT/gpu_all.log 2>&1
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/gpu_all.log | head
timeout 120 build-device/tilecraft test --op fused_moe --tag race > $OUT/race.log 2>&1; tail -3 $OUT/race.log
AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" timeout 150 scripts/device_check.sh ab:fused_moe:deepseek-v3-router-T256 ab:fused_moe:deepseek-v3-router-T16 ab:fused_moe:qwen3-30b-a3b-router-T256 >> $OUT/main.log 2>&1
for f in $OUT/ab_fused*.log; do echo "== $f"; grep -hE "###|gate_mapping " $f | cut -c1-60; done
cd $O && tar czf logs.tgz l
