# Session 41, call 5: what call 4 left (its GPU tests ran past 330 s with
# 29/33 passed, none failed; its layer test line passed --workload twice):
# the four random-shape GPU tests not reached, and the layer's test at
# Mixtral T=256 (now 128-row tiles) and ad-hoc shapes around the crossing.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
if [ -d $B ]; then cmake --build $B -j16; else make build BUILD_DIR=$B; fi > $OUT/build.log 2>&1; echo "build rc=$?"
timeout 100 $B/tilecraft test --op fused_moe --workload mixtral-8x7b-T256 \
  --shape T=1024,H=2048,I=768,E=128,K=8,dtype=bf16,routing=uniform,renormalize=true \
  --shape T=200,H=4096,I=1024,E=8,K=2,dtype=fp16,routing=skewed \
  --shape T=400,H=512,I=256,E=16,K=2,dtype=bf16,routing=empty_experts > $OUT/layer_test.log 2>&1; echo "layer test rc=$?"
grep -E "^\[|passed|failed|rror" $OUT/layer_test.log | cut -c1-160 | tail -8
(cd $B && timeout 260 ctest -j4 -L gpu -R "GpuRandomShapes" -E "LayersOnMmaSync" --output-on-failure > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?")
grep -E "Test +#|tests passed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head
cd $O && tar czf logs.tgz l
