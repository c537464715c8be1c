# Session 35 call 2: lean_a and lean_desc chosen by default (wip/lean-keys +
# the default change): the full GPU suite with them on, then the race cases'
# test (the issue's `tilecraft test --tag race`).
#   run(command="bash docs/measurements/2026-12-01-h200-session35/calls/call2.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
GPU_JOBS=3 GPU_TIMEOUT=420 scripts/device_check.sh build gpu > $OUT/main.log 2>&1; cat $OUT/main.log | tail -25
timeout 120 build-device/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"
tail -6 $OUT/race_test.log
cd $O && tar czf logs.tgz l
