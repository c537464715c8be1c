# Session 42, call 3: `tilecraft test --tag race` in full (call 2 gave it
# 150 s and it stopped after 10 of 16 cases, all passing; the six grouped
# GEMM cases at race 1's size check against cuBLAS and take ~20-30 s each).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
t0=$SECONDS; timeout 480 $B/tilecraft test --tag race > $OUT/race_test.log 2>&1
echo "race tests rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/race_test.log)"
grep -E "^\[" $OUT/race_test.log | cut -c1-110
cd $O && tar czf logs.tgz l
