# Call 5: butterfly group top-2 restored, redux top-k, prepare_mapping,
# acq_rel atomic, placing skips empty batches (tree) against 77703cc
# (.ab_kernels); routing GPU tests; ncu source counters of the one-block
# mapping at DeepSeek-V3 T=256; the trace.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1
(cd build-device && timeout 240 ctest -L gpu -R "GpuMoeTopkGate|GpuMoeFusedMapping|GpuFusedMoe.SmokeCases" -j 2 --timeout 200 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed" $OUT/gpu.log
AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" timeout 240 scripts/device_check.sh ab:fused_moe:deepseek-v3-router-T256 ab:fused_moe:deepseek-v3-router-T16 ab:fused_moe:deepseek-v3-router-T1 ab:fused_moe:qwen3-30b-a3b-router-T256 >> $OUT/main.log 2>&1
for f in $OUT/ab_fused*.log; do echo "== $f"; grep -hE "###|gate_mapping " $f | cut -c1-60; done
NCU_KERNELS=fused_mapping_kernel NCU_LINES=40 OP_TIMEOUT=90 timeout 120 scripts/device_check.sh ncusrc:moe_fused_mapping:deepseek-v3-t256 > $OUT/ncusrc.log 2>&1
grep -E "Duration|SM Frequency" $OUT/ncusrc_*.txt | head -4
rm -rf /tmp/kt && cp -r kernels /tmp/kt && python3 docs/measurements/2026-11-30-h200-session25/trace_gate_mapping.py /tmp/kt
TILECRAFT_KERNEL_DIR=/tmp/kt timeout 100 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-router-T256 --warmup 2 --repeat 10 --trials 1 > $OUT/trace_T256.log 2>&1
python3 docs/measurements/2026-11-30-h200-session25/trace_gate_mapping_summary.py $OUT/trace_T256.log > $OUT/trace_T256_summary.txt 2>&1
tail -3 $OUT/trace_T256_summary.txt; rm -f $OUT/trace_T256.log $OUT/*.ncu-rep $OUT/*.sass.csv
cd $O && tar czf logs.tgz l
