# Call 4: the race correctness cases, then one table on one board with this
# session's defaults (stmatrix epilogue, group_m=1 where experts average at
# most half a tile): every race and model row of fused_moe, L2 read-flushed
# before each timed call.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 90 build-device/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"; tail -3 $OUT/race_test.log
timeout 110 build-device/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
timeout 330 build-device/tilecraft bench --op fused_moe --tag model --warmup 2 --repeat 10 --trials 1 > $OUT/model.log 2>&1; echo "model rc=$?"
grep -hE "^\[" $OUT/race.log $OUT/model.log | cut -c1-120
cd $O && tar czf logs.tgz l
