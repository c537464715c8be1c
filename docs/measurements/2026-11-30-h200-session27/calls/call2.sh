# Call 2: the decode gate/up handing the down weights to the L2
# (decode_prefetch, chosen at Qwen3-30B T=1). GPU tests of the decode path
# (bitwise with it on and off), then the experts/layer A/B against
# decode_prefetch=0, three rounds of 20 repeats, and a traced run.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 150 ctest -L gpu -R "GpuFusedMoe.DecodePath|GpuFusedMoe.SmokeCases" --timeout 140 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
AB_ROUNDS=3 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_prefetch=0" timeout 200 scripts/device_check.sh abcfg:fused_moe:qwen3-30b-a3b-T1 >> $OUT/main.log 2>&1
AB_ROUNDS=1 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_prefetch=1" timeout 100 scripts/device_check.sh abcfg:fused_moe:qwen3-235b-a22b-T1 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|^\[|    experts |    gate_up |    down |WRONG" $f | cut -c1-100; done
timeout 60 build-device/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 --warmup 2 --repeat 3 --trials 1 --options release,trace > $OUT/trace_q30.log 2>&1
grep -vE "^ *cta " $OUT/trace_q30.log | grep -E "trace|slot" | cut -c1-120
cd $O && tar czf logs.tgz l
