# Call 8: the in-kernel combine with the slots' weights in shared memory
# (read before the barrier) and all 16 slice loads at once: traced, then
# A/B against decode_split_combine=0 (two rounds of 20 repeats), and the
# decode-split GPU test.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 60 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-T1 --warmup 2 --repeat 5 --trials 1 \
  --options release,trace > $OUT/trace_c1.log 2>&1
grep -vE "^ *cta " $OUT/trace_c1.log | grep -E "experts|slot  [89]|slot 1[01]" | cut -c1-110
(cd build-device && timeout 100 ctest -L gpu -R "GpuFusedMoe.DecodeSplit" --timeout 90 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
AB_ROUNDS=2 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_split_combine=0" timeout 120 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T1 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    experts |WRONG" $f | cut -c1-100; done
cd $O && tar czf logs.tgz l
