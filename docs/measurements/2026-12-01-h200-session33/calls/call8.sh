# Session 33, call 8 (main): T=1 rows three times each (DeepSeek-V3 sits on
# its 170 us target), experts and layer scopes.
#   run(command="bash docs/measurements/2026-12-01-h200-session33/calls/call8.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
: > $OUT/t1.log
for r in 1 2 3; do
  for w in deepseek-v3-T1 qwen3-30b-a3b-T1 qwen3-235b-a22b-T1; do
    timeout 60 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/t1.log 2>&1
  done
done
grep -hE "^\[|    experts |ceilings:" $OUT/t1.log | sed -E 's/ +\(.*//' | cut -c1-120
cd $O && tar czf logs.tgz l
