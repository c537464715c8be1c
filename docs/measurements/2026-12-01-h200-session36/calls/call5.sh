# Session 36 call 5 (main with fill_stores chosen): the whole GPU suite and
# the race's tests through the layer, on the tree that lands.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
GPU_JOBS=3 scripts/device_check.sh build gpu > $OUT/main.log 2>&1; grep -E "^== " $OUT/main.log
grep -E "tests passed|\*\*\*Failed|Timeout" $OUT/gpu_tests.log | head -20
timeout 150 build-device/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"
tail -3 $OUT/race_test.log
cd $O && tar czf logs.tgz l
