# Session 30 call 2: the fused combine (fused_combine=1) on the H200.
# GPU tests of it, then same-binary A/Bs: fused_combine 0 vs 1 (race 1, 2),
# and this tree's kernels against ad3fb83640 (kCombineOk = false: the old
# 56/224 register split) with the default (unfused) combine, race 2.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 300 ctest -R "FusedCombine" --output-on-failure > $OUT/gpu_fused.log 2>&1; echo "fused tests rc=$?"); tail -4 $OUT/gpu_fused.log
export OP_TIMEOUT=90 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1"
AB_CONFIGS=";fused_combine=1" scripts/device_check.sh abcfg:fused_moe:race-performance-2 abcfg:fused_moe:race-performance-1 >> $OUT/main.log 2>&1
grep -E "^###|experts |down |combine |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_race-performance-*.log | cut -c1-150
scripts/device_check.sh ab:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "^###|experts |down |gate_up |WRONG|TIMED|rror" $OUT/ab_fused_moe_race-performance-2.log | cut -c1-150
cd $O && tar czf logs.tgz l
