# Prepared by session 42 (not run): the one-kernel decode split stepping
# experts by the weights' strides, so views of a fused w13 [E, 2I, H] keep it
# at DeepSeek-V3-like T=1 (on main they fall back to the two-kernel decode
# path). docs/prepared/decode_split_views.patch (branch wip/decode-split-views):
# DecodeSplitParams gains gu_stride / down_stride (a parameter-header change:
# no --vs-kernels A/B; compare layouts in one process instead).
# Here, first: git apply docs/prepared/decode_split_views.patch
# Device (~4 min): run(command="bash docs/prepared/session43_decode_split_views.sh")
# Merge only if the tests pass and stacked DeepSeek-V3 T=1 keeps its time.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
(cd $B && timeout 150 ctest -R "StackedWeightsApart|DecodeSplit" --output-on-failure > $OUT/split_tests.log 2>&1; echo "tests rc=$?")
grep -E "tests passed|tests failed|Failure|Failed" $OUT/split_tests.log | head -10
D="H=7168,I=2048,E=256,K=8,n_group=8,topk_group=4,mode=sigmoid_grouped_topk,renormalize=true,scale=2.5,routing=uniform,dtype=bf16"
timeout 90 $B/tilecraft bench --op fused_moe --scopes experts --warmup 2 --repeat 20 --trials 1 \
  --shape T=1,$D,weights=stacked --shape T=1,$D,weights=fused > $OUT/views_bench.log 2>&1; echo "bench rc=$?"
grep -hE "^\[|    experts +median|WRONG" $OUT/views_bench.log | sed -E 's/ +\(p90.*//' | cut -c1-160
cd $O && tar czf logs.tgz l
