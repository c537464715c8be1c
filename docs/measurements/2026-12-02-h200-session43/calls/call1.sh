# Prepared by session 42 (its device time ran out): what it changed after
# its last device call, on the GPU (~4 min; run first, from the repository
# root, plain tree: no patch applied; session43_gpu_suite.sh right after).
# - Stacked weights whose experts lie apart (views of a fused gate/up tensor
#   [E, 2I, H]; the kernels step by the view's stride, TMA maps too):
#   GpuFusedMoe.StackedWeightsApartKeepTheBits (new) and the Python CUDA test
#   test_fused_gate_up_views_keep_the_bits (torch views).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
(cd $B && timeout 60 ctest -R "StackedWeightsApart" --output-on-failure > $OUT/views_test.log 2>&1; echo "views test rc=$?")
grep -E "tests passed|tests failed|Failure|Failed" $OUT/views_test.log | head -10
TILECRAFT_CACHE_DIR=/tmp/tilecraft_cache timeout 120 scripts/python_tests.sh $B > $OUT/python_tests.log 2>&1
echo "python tests rc=$?: $(tail -1 $OUT/python_tests.log)"
# w13 views against stacked copies at model shapes (experts scope; one
# process each; DeepSeek-V3 T=1 with views runs the two-kernel decode path:
# the one-kernel split takes contiguous experts only).
Q="H=2048,I=768,E=128,K=8,mode=softmax_topk,renormalize=true,routing=uniform,dtype=bf16"
D="H=7168,I=2048,E=256,K=8,n_group=8,topk_group=4,mode=sigmoid_grouped_topk,renormalize=true,scale=2.5,routing=uniform,dtype=bf16"
timeout 120 $B/tilecraft bench --op fused_moe --scopes experts --warmup 2 --repeat 10 --trials 1 \
  --shape T=4096,$Q,weights=stacked --shape T=4096,$Q,weights=fused --shape T=1,$D,weights=stacked --shape T=1,$D,weights=fused \
  > $OUT/views_bench.log 2>&1; echo "views bench rc=$?"
grep -hE "^\[|    experts +median|WRONG" $OUT/views_bench.log | sed -E 's/ +\(p90.*//' | cut -c1-160
cd $O && tar czf logs.tgz l
