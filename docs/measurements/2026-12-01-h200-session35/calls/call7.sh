# Session 35 call 7 (main + gate/up group_m=1 chosen for 64+ experts at up to
# two row tiles each, single CTAs): the new choice against the old (groups of
# 8) in one process on the three rows it changes; the layer's test on them;
# the persistent GPU test, which now also walks one row tile at a time.
#   run(command="bash docs/measurements/2026-12-01-h200-session35/calls/call7.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
for w in kimi-k2-T4096 qwen3-235b-a22b-T4096 qwen3-30b-a3b-T4096; do
  timeout 100 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 \
    --scopes experts,gate_up --vs-config gate_up_group_m=8 > $OUT/vs_$w.log 2>&1; echo "== vs $w rc=$?"
  grep -E "WRONG|ERROR|^    [a-z_@]+ +median" $OUT/vs_$w.log | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g' | cut -c1-150
done
for w in kimi-k2-T4096 qwen3-235b-a22b-T4096 qwen3-30b-a3b-T4096; do
  timeout 100 $B/tilecraft test --op fused_moe --workload $w >> $OUT/test.log 2>&1; echo "test $w rc=$?"
done
grep -E "PASS|FAIL|passed" $OUT/test.log | cut -c1-200
(cd $B && timeout 240 ctest -R "PersistentWarpSpecialisedKernel" --output-on-failure) > $OUT/gpu_test.log 2>&1
grep -E "tests passed|tests failed|Failure" $OUT/gpu_test.log | head -5
cd $O && tar czf logs.tgz l
