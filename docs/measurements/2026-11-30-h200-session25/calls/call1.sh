export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1
B=build-device/tilecraft
$B env > $OUT/env.txt 2>&1
for w in deepseek-v3-router-T256 deepseek-v3-router-T16 qwen3-30b-a3b-router-T256; do
  timeout 120 $B bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 > $OUT/bench_$w.log 2>&1
done
rm -rf /tmp/kt && cp -r kernels /tmp/kt && python3 docs/measurements/2026-11-30-h200-session25/trace_gate_mapping.py /tmp/kt
TILECRAFT_KERNEL_DIR=/tmp/kt timeout 150 $B bench --op fused_moe --workload deepseek-v3-router-T256 --warmup 2 --repeat 10 --trials 1 > $OUT/trace_T256.log 2>&1
python3 docs/measurements/2026-11-30-h200-session25/trace_gate_mapping_summary.py $OUT/trace_T256.log > $OUT/trace_T256_summary.txt 2>&1
grep -c GMTRACE $OUT/trace_T256.log; gzip $OUT/trace_T256.log
grep -hE "gate_mapping|routing" $OUT/bench_*.log | head -30
tail -40 $OUT/trace_T256_summary.txt
cd $O && tar czf logs.tgz l
