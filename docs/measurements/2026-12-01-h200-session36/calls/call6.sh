# Session 36 call 6 (main with fill_stores chosen): the table, as session
# 35's call 3 (race rows, model rows, T=1 rows; --warmup 2 --repeat 10).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
timeout 150 $B/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG|ceilings" $OUT/race.log | sed -E 's/ +\(.*//' | cut -c1-150
: > $OUT/model.log
for w in deepseek-v3-T4096 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096 deepseek-v3-T512 deepseek-v3-T16 deepseek-v3-T1 qwen3-30b-a3b-T1; do
  timeout 60 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/model.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG" $OUT/model.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
