# Session 31 call 3: the GPU tests on the new defaults (decode preload +
# carveout, time-based warmup); Qwen3-30B T=1 new default against the old
# (down_preload=0,carveout=0); which scope, run beside the main line, makes
# the main line 3.6 us faster (call 2); the model workloads' correctness.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 timeout 240 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "^== gpu" $OUT/main.log
W=qwen3-30b-a3b-T1
export OP_TIMEOUT=90 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 30 --trials 1"
AB_CONFIGS=";down_preload=0,carveout=0" scripts/device_check.sh abcfg:fused_moe:$W >> $OUT/main.log 2>&1
grep -E "^###|^\[|experts |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$W.log | sed -E 's/ +\(.*//' | cut -c1-130
for cfg in "down_preload=0,carveout=0" ""; do
  for x in main experts official_e2e clone cublas_per_expert cublas_dense routing; do
    sc=main; [ $x = main ] || sc=main,$x
    timeout 60 build-device/tilecraft bench --op fused_moe --workload $W --warmup 2 --repeat 30 --trials 1 --scopes $sc ${cfg:+--config $cfg} > $OUT/pair_${x}_${cfg:-default}.log 2>&1
    echo "config '${cfg:-default}' scopes $sc: $(grep -E '^\[' $OUT/pair_${x}_${cfg:-default}.log | grep -oE 'median [0-9.]+ us \(p90 [0-9.]+\)')"
  done
done
timeout 200 build-device/tilecraft test --op fused_moe --tag model > $OUT/test_model.log 2>&1; echo "test model rc=$?"; tail -3 $OUT/test_model.log
cd $O && tar czf logs.tgz l
