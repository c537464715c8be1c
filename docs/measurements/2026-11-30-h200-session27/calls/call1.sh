# One device call, written in session 26 for the next one (not yet run):
# the new trace GPU tests, then per-CTA traces of the kernels that keep the
# open targets open, each summarised per SM. Run it from the repository
# root on the device: bash docs/prepared/trace_call.sh (about 3 minutes).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 150 ctest -L gpu -R "GpuTrace" --timeout 140 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
for w in qwen3-30b-a3b-T1 deepseek-v3-T1 qwen3-30b-a3b-T4096 deepseek-v3-T4096; do
  timeout 90 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 3 --trials 1 \
    --options release,trace > $OUT/trace_$w.log 2>&1
  echo "== $w rc=$?"
  python3 scripts/trace_by_sm.py $OUT/trace_$w.log --groups 4 > $OUT/by_sm_$w.txt 2>&1
  grep -E "slot [0-9]+: [0-9]+ SMs" $OUT/by_sm_$w.txt | cut -c1-160
done
cd $O && tar czf logs.tgz l
