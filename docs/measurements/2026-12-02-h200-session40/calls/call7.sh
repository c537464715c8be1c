# Session 40: the race tag on every op (the issue's `tilecraft test --tag race`).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 400 build-device/tilecraft test --tag race > $OUT/race_tests.log 2>&1; echo "race tests rc=$?"
grep -E "PASS|FAIL|passed" $OUT/race_tests.log | cut -c1-140
cd $O && tar czf logs.tgz l
