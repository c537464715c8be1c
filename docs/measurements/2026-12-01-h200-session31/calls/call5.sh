# Session 31 call 5: the final tree (decode preload + carveout by default,
# time-based warmup). The race cases against the golden, the race table and
# the model rows, each bench verified against the golden.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 100 build-device/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"; tail -1 $OUT/race_test.log
timeout 130 build-device/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
: > $OUT/model.log
for w in deepseek-v3-T1 deepseek-v3-T16 deepseek-v3-T512 deepseek-v3-T4096 qwen3-30b-a3b-T1 qwen3-30b-a3b-T4096 qwen3-235b-a22b-T1 mixtral-8x7b-T4096; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/model.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG" $OUT/race.log $OUT/model.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
