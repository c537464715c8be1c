# Session 30 call 7: the final tree. Every GPU test, the CPU test that
# lists the decode-split kernels (it failed on GPU machines before this
# session's fix), the race cases against the golden, the race table, and
# the decode rows that the preload changes (Qwen3-30B T=1) or could
# (DeepSeek-V3 T=1, Qwen3-235B T=1: not chosen there).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "gpu_tests|Failed|FAILED" $OUT/main.log | head
(cd build-device && timeout 120 ctest -R "DecodeSplitKernelsAndErrors|Cli.BenchScopesFilter" --output-on-failure > $OUT/cpu_on_gpu.log 2>&1; echo "cpu-on-gpu tests rc=$?")
timeout 90 build-device/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"; tail -1 $OUT/race_test.log
timeout 110 build-device/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
for w in qwen3-30b-a3b-T1 deepseek-v3-T1 qwen3-235b-a22b-T1; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload $w --warmup 5 --repeat 20 --trials 1 > $OUT/decode_$w.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only " $OUT/race.log $OUT/decode_*.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
