# Session 38 call 5: the table on this session's final kernels (main after
# call 4): the race's four cases, DeepSeek-V3 T=4096 and Qwen3-30B T=4096.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
timeout 100 $B/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
for w in deepseek-v3-T4096 qwen3-30b-a3b-T4096; do
  timeout 40 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/model.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG|ceilings \(|GPU over" $OUT/race.log $OUT/model.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
