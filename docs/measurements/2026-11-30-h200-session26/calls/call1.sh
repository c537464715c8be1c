# Call 1 (tree: session 26 start, 935f132 + the extra manifest): stop 25's
# unrun GPU work (trace option, gate+mapping at K = 4-6), built-in traces of
# the gate+mapping and decode_split=1 kernels, the layer at T=1 with and
# without router_split (three rounds), and router configs at T=4096.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
M=docs/measurements/2026-11-30-h200-session26/router_prefill.yaml
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 150 ctest -L gpu -R "GpuTrace|GateMapping" -j 2 --timeout 140 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
for w in deepseek-v3-router-T256 deepseek-v3-T1; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload $w --warmup 1 --repeat 1 --trials 1 --options release,trace > $OUT/trace_$w.log 2>&1; echo "trace $w rc=$?"
done
AB_ROUNDS=3 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" AB_CONFIGS=";router_split=0" timeout 150 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-router-T1 >> $OUT/main.log 2>&1
AB_ROUNDS=1 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 1 --repeat 3 --trials 1 --manifest $M" AB_CONFIGS=";router_block_n=64;router_block_n=128;router_block_m=64 router_sm90=2 router_block_n=128;router_block_m=64 router_block_n=64 router_k_splits=2" timeout 200 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-router-T4096 >> $OUT/main.log 2>&1
grep -hE "###|^\[|    routing |experts  |layer|WRONG" $OUT/abcfg_*.log | cut -c1-80
cd $O && tar czf logs.tgz l
