# Session 30 call 10: every CPU-labelled test on the GPU machine (a user's
# `make test` there runs them next to the GPU tests; call 6 found one that
# assumed no GPU).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 240 ctest -L cpu -j 12 --output-on-failure > $OUT/cpu_tests_on_gpu.log 2>&1; echo "cpu tests rc=$?")
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  " $OUT/cpu_tests_on_gpu.log | head -20
cd $O && tar czf logs.tgz l
