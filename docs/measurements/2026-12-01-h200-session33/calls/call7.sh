# Session 33, call 7 (main): `tilecraft test --tag race` with call 3's kernels.
#   run(command="bash docs/measurements/2026-12-01-h200-session33/calls/call7.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 300 build-device/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"
tail -8 $OUT/race_test.log | cut -c1-160
cd $O && tar czf logs.tgz l
