# Session 30 call 4: the Qwen3-30B T=1 layer's own trace (cached_e2e, the
# main line): with --scopes clone the last traced launches are the main
# line's (clone launches no traced kernel), unlike call 1's official_e2e.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
for s in clone experts; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 --options release,trace --scopes $s \
    --warmup 2 --repeat 10 --trials 1 > $OUT/trace_qwen3_30b_t1_$s.log 2>&1; echo "trace $s rc=$?"
  grep -E "median|slot  [0-9]:|^    trace" $OUT/trace_qwen3_30b_t1_$s.log | sed 's/(its last launch, //' | cut -c1-60,150-230
done
cd $O && tar czf logs.tgz l
