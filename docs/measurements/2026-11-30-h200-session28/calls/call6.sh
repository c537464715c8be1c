# Call 6: one consistent table for the closing note: every race and
# model row of fused_moe on this board, final kernels (the same kernel code
# as stop 27's f8b8c8f), L2 read-flushed before each timed call.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 110 build-device/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
timeout 330 build-device/tilecraft bench --op fused_moe --tag model --warmup 2 --repeat 10 --trials 1 > $OUT/model.log 2>&1; echo "model rc=$?"
grep -hE "^\[" $OUT/race.log $OUT/model.log | cut -c1-150
cd $O && tar czf logs.tgz l
