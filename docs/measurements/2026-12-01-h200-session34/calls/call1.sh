# Prepared in session 33 for the next session (not yet run). Branch
# wip/wait-hint: every mbarrier wait passes try_wait a suspend-time hint
# (1 ms), which ptxas turns into NANOSLEEP.SYNCS (the warp sleeps until the
# barrier's phase completes) instead of a TRYWAIT + YIELD spin. Why: session
# 33 measured the H200 holding race 2's GEMMs at its 700 W cap 94-99% of the
# time (call 9), ours at 1.793 J per call against cuBLAS's loop at 1.65 J,
# the same ratio as the times (1.09); ncu has our gate/up issuing 1.40
# instructions per cycle against cuBLAS's 0.47 (call 1), much of it waits.
# Fewer instructions, less energy, a higher clock under the cap. The risk:
# the sleep's wake-up latency on the consumers' path to their MMAs and on
# the decode kernels (bulk GEMV, decode_split use the same waits).
# Here, before the call:
#   git checkout wip/wait-hint && git rebase main && scripts/kernel_ab.sh main
# then run(command="bash docs/prepared/session34_wait_hint.sh", carry=[".ab_kernels"]) (about 9 min).
# Merge only if the GPU tests pass and the time (and J/call) gains.
grep -q "kWaitSuspendNs" kernels/tile/mbarrier.cuh || { echo "not on wip/wait-hint"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 timeout 250 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "^== gpu" $OUT/main.log
export OP_TIMEOUT=100 AB_ROUNDS=2
BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only --energy-ms 1500" \
  timeout 200 scripts/device_check.sh ab:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
export BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes experts"
for w in deepseek-v3-T1 qwen3-30b-a3b-T1 deepseek-v3-T4096; do
  timeout 120 scripts/device_check.sh ab:fused_moe:$w >> $OUT/main.log 2>&1
done
for w in race-performance-2 deepseek-v3-T1 qwen3-30b-a3b-T1 deepseek-v3-T4096; do
  grep -E "^###|gate_up |down |kernel_only |experts |energy |WRONG|TIMED|rror" $OUT/ab_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-150
done
cd $O && tar czf logs.tgz l
