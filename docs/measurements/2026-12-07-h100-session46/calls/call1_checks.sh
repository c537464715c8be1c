# Prepared by session 45 (no device machine could be started in it: eight
# starts refused, the whole budget). One call holds everything, most
# important first, each step cut to what is left before DEADLINE seconds
# (default 570; pass less when less device time is left):
# 1. the fused combine's fix (warp-uniform chunk trips) on the two shapes
#    that hung in sessions 43-44, alone under timeouts;
# 2. the fused-combine GPU tests;
# 3. the rest of the GPU suite (host changes of sessions 44-45);
# 4. the CLI fuzz seed that hung (16), the race tag through the CLI.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
D=${DEADLINE:-570}
left() { echo $((D - SECONDS)); }
cap() { local l=$(left); echo $(( $1 < l ? $1 : l )); }
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
run() {  # name, timeout, args...
  local n=$1 t=$2; shift 2; local t0=$SECONDS
  [ $t -lt 15 ] && { echo "$n: skipped (no time left)"; return; }
  timeout $t "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/$n.log | cut -c1-200)"
}
S1='T=2814,H=664,I=648,E=55,K=1,dtype=fp16,weights=stacked,routing=uniform,mode=sigmoid_grouped_topk,n_group=5,topk_group=2,scale=2.5,renormalize=true,config=fused_combine=1'
S2='T=86,H=1232,I=552,E=64,K=6,dtype=fp16,weights=per_expert,routing=router,renormalize=true,config=mapping_blocks=1;fused_combine=1'
run shape_h664 $(cap 40) $B/tilecraft test --op fused_moe --shape "$S1"
run shape_h1232 $(cap 40) $B/tilecraft test --op fused_moe --shape "$S2"
run ctest_combine $(cap 120) ctest --test-dir $B -R "FusedCombine" --output-on-failure
run gpu_tests $(cap 380) ctest --test-dir $B -L gpu -E "FusedCombine" -j 6 --output-on-failure
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
run fuzz_layer_16 $(cap 80) $B/tilecraft test --op fused_moe --random 50 --random-config --seed 16 --case-timeout 40
run race $(cap 90) $B/tilecraft test --tag race --case-timeout 50
# 5. The combine warps under synccheck (divergent full-mask collectives
#    are what it reports) on the small shape that hung (H / 8 = 154).
run synccheck $(cap 120) compute-sanitizer --tool synccheck --error-exitcode 3 $B/tilecraft test --op fused_moe --shape "$S2"
cd $O && tar czf logs.tgz l
