# Prepared by session 46, whose GPU runs were all on H100s (no H200 was
# lent): the "tested on the H200" for today's tree. DEADLINE=N
# (default 570) cuts each step to what is left, most important first:
# 1. the README's build (make build, -Werror, g++ 13);
# 2. the full GPU suite (55 tests; 320 s on session 46's H100 at -j 6);
# 3. tilecraft test --tag race (174 s there).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
D=${DEADLINE:-570}
cap() { local l=$((D - SECONDS)); echo $(( $1 < l ? $1 : l )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
run() {  # name, timeout, args...
  local n=$1 t=$2; shift 2; local t0=$SECONDS
  [ $t -lt 15 ] && { echo "$n: skipped (no time left)"; return; }
  timeout $t "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/$n.log | cut -c1-200)"
}
run gpu_tests $(cap 360) ctest --test-dir $B -L gpu -j 6 --output-on-failure
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
run race $(cap 200) $B/tilecraft test --tag race --case-timeout 60
cd $O && tar czf logs.tgz l
