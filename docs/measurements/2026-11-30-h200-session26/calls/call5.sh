# Call 5 (trace origins on one timeline): the whole layer at DeepSeek-V3
# T=1 with the router (headline ~217 us against routing 15 + experts 174):
# a traced run (gate and decode kernels on the global clock), and the
# untraced layer at 30 repeats, three times, for the bimodal headline.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 60 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-router-T1 --warmup 2 --repeat 5 --trials 1 --options release,trace > $OUT/trace_router_T1.log 2>&1; echo "trace rc=$?"
grep -E "^\[|    trace|slot" $OUT/trace_router_T1.log | cut -c1-160
for r in 1 2 3; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-router-T1 --warmup 5 --repeat 30 --trials 1 > $OUT/layer_T1_$r.log 2>&1
  grep -hE "^\[|    routing |    experts |GPU over" $OUT/layer_T1_$r.log | cut -c1-150
done
cd $O && tar czf logs.tgz l
