# Call 4: placing skips empty batches, redux intrinsics (tree) against 77703cc (.ab_kernels)
# Routing GPU tests, the trace, the SASS.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1
(cd build-device && timeout 240 ctest -L gpu -R "GpuMoeTopkGate|GpuMoeFusedMapping" -j 2 --timeout 200 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed" $OUT/gpu.log
AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" timeout 300 scripts/device_check.sh ab:fused_moe:deepseek-v3-router-T256 ab:fused_moe:deepseek-v3-router-T16 ab:fused_moe:deepseek-v3-router-T1 ab:fused_moe:qwen3-30b-a3b-router-T256 ab:fused_moe:qwen3-30b-a3b-router-T16 ab:moe_fused_mapping:deepseek-v3-t4096 ab:moe_fused_mapping:race-case1 >> $OUT/main.log 2>&1
for f in $OUT/ab_fused*.log; do echo "== $f"; grep -hE "###|gate_mapping " $f | cut -c1-60; done; for f in $OUT/ab_moe*.log; do echo "== $f"; grep -hE "###|median" $f | cut -c1-60; done
rm -rf /tmp/kt && cp -r kernels /tmp/kt && python3 docs/measurements/2026-11-30-h200-session25/trace_gate_mapping.py /tmp/kt
TILECRAFT_KERNEL_DIR=/tmp/kt timeout 150 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-router-T256 --warmup 2 --repeat 10 --trials 1 > $OUT/trace_T256.log 2>&1
python3 docs/measurements/2026-11-30-h200-session25/trace_gate_mapping_summary.py $OUT/trace_T256.log > $OUT/trace_T256_summary.txt 2>&1
tail -4 $OUT/trace_T256_summary.txt
j=$(grep -l '"config": "gate+mapping sigmoid_grouped_topk E=256' ~/.cache/tilecraft/kernels/*/*.json | head -1)
cuobjdump -sass ${j%.json}.cubin > $OUT/gm.sass 2>&1; grep -c REDUX $OUT/gm.sass
cd $O && tar czf logs.tgz l
