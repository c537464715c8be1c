# Call 2: prepare_mapping in every block + one acq_rel atomic (tree) against
# 77703cc's kernels (.ab_kernels), GPU routing tests, and the new trace.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1
(cd build-device && timeout 240 ctest -L gpu -R "GpuMoeTopkGate|GpuMoeFusedMapping|GpuFusedMoe.SmokeCases|GpuFusedMoe.CudaGraph|DependentLaunch" -j 2 --timeout 200 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed" $OUT/gpu.log
AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" timeout 300 scripts/device_check.sh ab:fused_moe:deepseek-v3-router-T256 ab:fused_moe:deepseek-v3-router-T16 ab:fused_moe:deepseek-v3-router-T1 ab:fused_moe:qwen3-30b-a3b-router-T256 ab:moe_fused_mapping:deepseek-v3-t256 >> $OUT/main.log 2>&1
grep -hE "###|gate_mapping|mapping  " $OUT/ab_*.log | grep -v "^\[" | cut -c1-90
rm -rf /tmp/kt && cp -r kernels /tmp/kt && python3 docs/measurements/2026-11-30-h200-session25/trace_gate_mapping.py /tmp/kt
TILECRAFT_KERNEL_DIR=/tmp/kt timeout 150 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-router-T256 --warmup 2 --repeat 10 --trials 1 > $OUT/trace_T256.log 2>&1
python3 docs/measurements/2026-11-30-h200-session25/trace_gate_mapping_summary.py $OUT/trace_T256.log > $OUT/trace_T256_summary.txt 2>&1
gzip $OUT/trace_T256.log; tail -6 $OUT/trace_T256_summary.txt
cd $O && tar czf logs.tgz l
