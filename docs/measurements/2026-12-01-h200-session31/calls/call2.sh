# Session 31 call 2: the time-based warmup (--warmup-ms, default 25). Does
# Qwen3-30B T=1's layer time still depend on which scopes run? (call 1:
# 28.8 alone against 25.0 among every scope in session 30). Then the
# decode preload + carveout under the new protocol, and the T=1 rows.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 200 ctest -R "GpuRuntime|Cli\." --output-on-failure > $OUT/tests.log 2>&1; echo "tests rc=$?"; grep -E "tests passed|Failed|\*\*\*" $OUT/tests.log | head)
W=qwen3-30b-a3b-T1
for wm in 0 25; do
  for s in main experts all; do
    sc=""; [ $s = all ] || sc="--scopes $s"
    timeout 60 build-device/tilecraft bench --op fused_moe --workload $W --warmup 2 --repeat 30 --trials 1 --warmup-ms $wm $sc > $OUT/q_${s}_wm$wm.log 2>&1
    echo "warmup-ms $wm scopes $s: $(grep -E '^\[' $OUT/q_${s}_wm$wm.log | grep -oE 'median [0-9.]+ us \(p90 [0-9.]+\)') experts $(grep -E '^    experts ' $OUT/q_${s}_wm$wm.log | grep -oE 'median +[0-9.]+')"
  done
done
export OP_TIMEOUT=90 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 30 --trials 1"
AB_CONFIGS=";down_preload=1,carveout=1" scripts/device_check.sh abcfg:fused_moe:$W >> $OUT/main.log 2>&1
grep -E "^###|^\[|experts |down |gate_up |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$W.log | sed -E 's/ +\(.*//' | cut -c1-130
for w in deepseek-v3-T1 qwen3-235b-a22b-T1; do
  timeout 90 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 30 --trials 1 > $OUT/t1_$w.log 2>&1
  grep -E "^\[|experts |kernel_only |cublas_per" $OUT/t1_$w.log | sed -E 's/ +\(.*//' | cut -c1-160
done
cd $O && tar czf logs.tgz l
