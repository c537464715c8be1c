# Session 49: the tree's checks on one GPU, most important first; DEADLINE=N
# (default 570) cuts each step to what is left, and STEPS picks steps (a
# second call on the same warm machine finds the build):
#   gpu   the full GPU suite (58 tests; 217 s on session 48's H100 at -j 6);
#   cli   the CLI tests with a GPU present (--device's GPU branch and the
#         random command lines among them);
#   python  the Python tests with torch (tilecraft.env(device)'s GPU branch);
#   race  tilecraft test --tag race (133 s on session 48's H100).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
D=${DEADLINE:-570}
STEPS=${STEPS:-gpu cli python race}
cap() { local l=$((D - SECONDS)); echo $(( $1 < l ? $1 : l )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
git log --oneline -1 2>/dev/null; git status --short 2>/dev/null | head -20
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
run() {  # name, timeout, args...
  local n=$1 t=$2; shift 2; local t0=$SECONDS
  [ $t -lt 15 ] && { echo "$n: skipped (no time left)"; return; }
  timeout $t "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/$n.log | cut -c1-200)"
}
for s in $STEPS; do case $s in
  gpu) run gpu_tests $(cap 360) ctest --test-dir $B -L gpu -j 6 --output-on-failure
       grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20 ;;
  cli) run cli_tests $(cap 240) ctest --test-dir $B -R "^Cli" -j 4 --output-on-failure
       grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/cli_tests.log | head -20 ;;
  python) TILECRAFT_CACHE_DIR=$PWD/$B/test_jit_cache run python $(cap 150) scripts/python_tests.sh $B
       grep -aE "^E |FAILED" $OUT/python.log | head -5 ;;
  race) run race $(cap 200) $B/tilecraft test --tag race --case-timeout 60 ;;
esac; done
cd $O && tar czf logs.tgz l
