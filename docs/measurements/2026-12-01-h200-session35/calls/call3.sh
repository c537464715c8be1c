# Session 35 call 3 (main 10e4922: lean_a and lean_desc chosen by default):
# the table under the two-pass flush (race rows, model rows, T=1 rows, as
# session 33's call 5), then the lean keys against neither in one process
# on race 2 and DeepSeek-V3 T=4096 (the default's gain as the table sees it).
#   run(command="bash docs/measurements/2026-12-01-h200-session35/calls/call3.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
timeout 150 $B/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |    layer |WRONG|ceiling" $OUT/race.log | sed -E 's/ +\(.*//' | cut -c1-150
: > $OUT/model.log
for w in deepseek-v3-T4096 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096 deepseek-v3-T512 deepseek-v3-T16 deepseek-v3-T1 qwen3-30b-a3b-T1; do
  timeout 60 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/model.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG|ceilings:" $OUT/model.log | sed -E 's/ +\(.*//' | cut -c1-150
for w in race-performance-2 deepseek-v3-T4096; do
  timeout 90 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 \
    --scopes experts,kernel_only --vs-config lean_a=0,lean_desc=0 > $OUT/vs_$w.log 2>&1; echo "vs $w rc=$?"
  grep -E "held back|WRONG|^    [a-z_@]+ +median" $OUT/vs_$w.log | sed -E 's/ +\(.*//' | cut -c1-150
done
cd $O && tar czf logs.tgz l
