# Session 43, call 7: call 6's fuzz stopped inside one case (seed 14, case
# 46: fused_combine=1 at T=2814, K=1, E=55): a hang, or a slow golden?
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s"
S='T=2814,H=664,I=648,E=55,K=1,dtype=fp16,weights=stacked,routing=uniform,mode=sigmoid_grouped_topk,n_group=5,topk_group=2,scale=2.5,renormalize=true'
t0=$SECONDS; timeout 40 $B/tilecraft test --op fused_moe --shape "$S,config=fused_combine=1" > $OUT/fc1.log 2>&1; echo "fused_combine=1 rc=$? in $((SECONDS - t0))s"
t0=$SECONDS; timeout 30 $B/tilecraft test --op fused_moe --shape "$S" > $OUT/fc0.log 2>&1; echo "default rc=$? in $((SECONDS - t0))s"
tail -2 $OUT/fc1.log | cut -c1-300; tail -1 $OUT/fc0.log | cut -c1-200
cd $O && tar czf logs.tgz l
