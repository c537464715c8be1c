# Session 41, call 4: the layer's tile height by spill (64-row wgmma tiles
# only while mean + 2 sqrt(mean) rows per expert fit 64; call 3's crossing).
# GPU tests of the layer, the grouped GEMM and the random shapes; the layer's
# test at Mixtral T=256 (now 128-row tiles) and at ad-hoc shapes around the
# crossing; plain benches of Mixtral T=256 and Qwen3-30B T=1024.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror; G="--warmup 2 --repeat 10 --trials 1"
if [ -d $B ]; then cmake --build $B -j16; else make build BUILD_DIR=$B; fi > $OUT/build.log 2>&1; echo "build rc=$? warnings: $(grep -c 'warning:' $OUT/build.log)"
(cd $B && timeout 330 ctest -j4 -L gpu -R "GpuFusedMoe|GpuMoeGroupedGemm|GpuRandomShapes" --output-on-failure > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?")
grep -E "tests passed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head
timeout 120 $B/tilecraft test --op fused_moe --workload mixtral-8x7b-T256 --workload qwen3-30b-a3b-T512 \
  --shape T=1024,H=2048,I=768,E=128,K=8,dtype=bf16,routing=uniform,renormalize=true \
  --shape T=200,H=4096,I=1024,E=8,K=2,dtype=fp16,routing=skewed \
  --shape T=400,H=512,I=256,E=16,K=2,dtype=bf16,routing=empty_experts > $OUT/layer_test.log 2>&1; echo "layer test rc=$?"
grep -E "^\[|passed|failed" $OUT/layer_test.log | cut -c1-160 | tail -8
timeout 60 $B/tilecraft bench --op fused_moe --workload mixtral-8x7b-T256 $G > $OUT/mixtral256.log 2>&1; echo "bench T256 rc=$?"
timeout 60 $B/tilecraft bench --op fused_moe --shape T=1024,H=2048,I=768,E=128,K=8,dtype=bf16,routing=uniform,renormalize=true $G > $OUT/qwen1024.log 2>&1; echo "bench qwen T1024 rc=$?"
grep -hE "^\[|    (experts|kernel_only|cublas_per_expert|gate_up|down) +median|WRONG" $OUT/mixtral256.log $OUT/qwen1024.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
