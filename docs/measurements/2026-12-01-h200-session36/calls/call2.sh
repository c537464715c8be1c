# Session 36 call 2: where the memory-bound GEMMs lose time at their tails.
# Per-CTA stamps (--options trace: the named scope runs once more after the
# check, L2 flushed, so the stamps are its own) of the gate/up and down GEMMs
# on DeepSeek-V3 T=512 / T=4096 and Qwen3-30B T=4096; calls/tail.py sums each
# kernel's tail (SM-time idle between a CTA's end and the kernel's end).
# Then ncu of race 2's gate/up (call 1's ncu caught the router GEMM).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
C=docs/measurements/2026-12-01-h200-session36/calls
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
for w in deepseek-v3-T512 deepseek-v3-T4096 qwen3-30b-a3b-T4096; do
  for s in gate_up down; do
    timeout 60 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 3 --trials 1 --scopes $s \
      --options release,trace > $OUT/trace_${w}_$s.log 2>&1; echo "== trace $w $s rc=$?"
    grep -E "^    $s +median" $OUT/trace_${w}_$s.log | cut -c1-80
    python3 $C/tail.py $OUT/trace_${w}_$s.log | cut -c1-230
  done
done
timeout 200 ncu --kernel-name-base demangled --kernel-name "regex:grouped_gemm_sm90_ws_kernel<__half, __half" \
  --launch-count 1 --section SpeedOfLight --section InstructionStats --section ComputeWorkloadAnalysis \
  $B/tilecraft bench --op fused_moe --workload race-performance-2 --warmup 0 --repeat 1 --trials 1 --scopes gate_up \
  > $OUT/ncu_race2.txt 2>&1; echo "ncu rc=$?"
grep -E "ws_kernel<|Duration|Compute \(SM\)|L2 Cache Throughput|Executed Ipc A|Issue Slots Busy|Executed Instructions  " $OUT/ncu_race2.txt | head -12
cd $O && tar czf logs.tgz l
