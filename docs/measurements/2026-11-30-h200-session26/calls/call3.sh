# Call 3 (tree: the router rule (64 x 128 warp-specialised tiles) and trace
# launch ids): trace and gate+mapping GPU tests, the routing-tagged cases
# (now T = 1024 and 4096 too), one traced bench, and the rule against
# router_split=0 at T = 512 (where it keeps split K: against 64 x 128),
# 1024, 4096 and Qwen3-30B T=4096.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
M=docs/measurements/2026-11-30-h200-session26/router_prefill.yaml
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 150 ctest -L gpu -R "GpuTrace|GateMapping|GpuMoeGroupedGemm" -j 2 --timeout 140 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
timeout 150 build-device/tilecraft test --op fused_moe --tag routing > $OUT/routing_test.log 2>&1; tail -3 $OUT/routing_test.log
timeout 60 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-router-T256 --warmup 1 --repeat 3 --trials 1 --options release,trace > $OUT/trace_T256.log 2>&1; echo "trace rc=$?"
grep -A14 "trace &" $OUT/trace_T256.log | head -40
export AB_ROUNDS=2 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 1 --repeat 5 --trials 1 --manifest $M"
AB_CONFIGS=";router_block_m=64 router_sm90=2 router_block_n=128" timeout 120 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-router-T512 >> $OUT/main.log 2>&1
AB_CONFIGS=";router_split=0" timeout 200 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-router-T1024 abcfg:fused_moe:deepseek-v3-router-T4096 abcfg:fused_moe:qwen3-30b-a3b-router-T4096 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    routing |WRONG|ERROR" $f | cut -c1-60; done
cd $O && tar czf logs.tgz l
