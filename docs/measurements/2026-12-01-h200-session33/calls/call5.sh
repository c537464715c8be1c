# Session 33, call 5 (main 8b48f3e: call 3's consumer change merged): the
# table under the two-pass flush, race rows then model rows (as session 32's
# calls 3-4), then T=1 rows.
#   run(command="bash docs/measurements/2026-12-01-h200-session33/calls/call5.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 150 build-device/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |    layer |WRONG|ceiling" $OUT/race.log | sed -E 's/ +\(.*//' | cut -c1-150
: > $OUT/model.log
for w in deepseek-v3-T4096 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096 deepseek-v3-T512 deepseek-v3-T16 deepseek-v3-T1 qwen3-30b-a3b-T1; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/model.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG|ceilings:" $OUT/model.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
