# Session 49: the tree's checks on one GPU, most important first; DEADLINE=N
# (default 560) cuts each step to what is left, and STEPS picks steps (a
# second call on the same warm machine finds the build):
#   gpu   the full GPU suite (58 tests; 217 s on session 48's H100 at -j 6);
#   cli   the CLI tests with a GPU present (--device's GPU branch and the
#         random command lines among them);
#   python  the Python tests with torch (tilecraft.env(device)'s GPU branch);
#   race  tilecraft test --tag race (133 s on session 48's H100);
#   large tilecraft test --tag large (tensors past 2^31 elements; only if named).
. scripts/device_steps.sh
STEPS=${STEPS:-gpu cli python race}
git log --oneline -1 2>/dev/null; git status --short 2>/dev/null | head -20
build_tree
for s in $STEPS; do case $s in
  gpu) run gpu_tests 360 ctest --test-dir $B -L gpu -j 6 --output-on-failure
       grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20 ;;
  cli) run cli_tests 240 ctest --test-dir $B -R "^Cli" -j 4 --output-on-failure
       grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/cli_tests.log | head -20 ;;
  python) TILECRAFT_CACHE_DIR=$PWD/$B/test_jit_cache run python 150 scripts/python_tests.sh $B
       grep -aE "^E |FAILED" $OUT/python.log | head -5 ;;
  race) run race 200 $B/tilecraft test --tag race --case-timeout 60 ;;
  large) run large 400 $B/tilecraft test --tag large --case-timeout 120 ;;  # (not in the default STEPS: ~8 min)
esac; done
pack_logs
