# Session 36 call 8 (main with fill_stores up to one row tile per expert,
# host-only change after call 5's suite): the layer's GPU tests and the
# grouped GEMM's fill test, the race's tests, and the two rows the rule
# moved, DeepSeek-V3 T=512 (on) and Qwen3-30B T=4096 (off again).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 200 ctest -L gpu -j 3 --output-on-failure -R "GpuFusedMoe|FillStores") > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; grep -E "tests passed|\*\*\*Failed" $OUT/gpu_tests.log | head
timeout 120 $B/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"; tail -1 $OUT/race_test.log
for w in deepseek-v3-T512 qwen3-30b-a3b-T4096; do
  timeout 60 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 > $OUT/bench_$w.log 2>&1
  echo "$w rc=$?"; grep -hE "^\[|    experts |WRONG|ceilings:" $OUT/bench_$w.log | sed -E 's/ +\(.*//' | cut -c1-200
done
cd $O && tar czf logs.tgz l
