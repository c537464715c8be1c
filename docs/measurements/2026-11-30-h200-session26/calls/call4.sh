# Call 4 (final kernels and host code of the session): the full GPU suite,
# the race cases (their functional T = 8192 routers now take 64 x 128
# warp-specialised tiles), and per-CTA traces with SM ids of the
# decode_split=1 kernel (DeepSeek-V3 and Kimi-K2 T=1).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
for w in deepseek-v3-T1 kimi-k2-T1; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 3 --trials 1 --options release,trace > $OUT/trace_$w.log 2>&1; echo "trace $w rc=$?"
done
grep -A10 "trace &" $OUT/trace_deepseek-v3-T1.log | head -12
timeout 150 build-device/tilecraft test --op fused_moe --tag race > $OUT/race.log 2>&1; tail -2 $OUT/race.log
(cd build-device && timeout 330 ctest -L gpu -j 2 --timeout 250 --output-on-failure) > $OUT/gpu_all.log 2>&1
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/gpu_all.log | head
cd $O && tar czf logs.tgz l
