# Prepared in session 32 for a later session (not yet run). Branch
# wip/tma-row-gather: key tma=3, the gate/up projection's gathered A rows by
# one-row tensor copies (each producer thread copies its tile row per
# k-step) instead of 128 threads' cp.async. Why: session 32's ncu had race
# 2's gate/up consumers waiting on full stages for a quarter of their
# samples (one CTA per tile) and twice that on CTA pairs, whose lockstep
# waits for the later of two stage latencies; the down projection, A by
# one tensor copy, waits 3%. Unknowns: whether the 128-byte swizzle places
# a one-row box by its shared-memory address (the GPU tests answer: the
# golden and the layer's bits), and the cost of 128 tensor copies per
# stage. Here, before the call:
#   git checkout wip/tma-row-gather && git rebase main
# then run(command="bash docs/prepared/session33_row_tma.sh") (about 9 min).
# Merge only if the GPU tests pass and some row gains.
grep -q "ROW_A" kernels/moe/grouped_gemm_sm90_ws.cuh || { echo "not on wip/tma-row-gather"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 200 build-device/tests/tilecraft_gpu_tests --gtest_filter='*RowTma*:GpuMoeGroupedGemm.WarpSpecialisedKernel' \
  > $OUT/row_tests.log 2>&1; echo "row tests rc=$?"; grep -aE "^\[  (PASSED|FAILED) |Failure" $OUT/row_tests.log | head
grep -aq "^\[  PASSED  \] 3 tests" $OUT/row_tests.log || { cd $O && tar czf logs.tgz l; exit 1; }
export OP_TIMEOUT=120 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,kernel_only"
export AB_CONFIGS=";gate_up_tma=3;gate_up_tma=3,gate_up_cluster=2,gate_up_multicast=1"
for w in race-performance-2 mixtral-8x7b-T4096 qwen3-30b-a3b-T4096; do
  timeout 200 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
  grep -E "^###|gate_up |kernel_only |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
AB_CONFIGS=";gate_up_tma=3;gate_up_tma=3,gate_up_multicast=1" timeout 200 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T4096 >> $OUT/main.log 2>&1
grep -E "^###|gate_up |kernel_only |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_deepseek-v3-T4096.log | sed -E 's/ +\(.*//' | cut -c1-120
NCU_KERNELS=grouped_gemm_sm90_ws NCU_SKIP=1 NCU_LINES=12 NCU_TAG=row NCU_FLAGS="--config gate_up_tma=3" OP_TIMEOUT=150 \
  scripts/device_check.sh ncusrc:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "Duration|Compute \(SM\)|L2 Cache" $OUT/ncusrc_fused_moe_race-performance-2_row.txt; head -6 $OUT/ncusrc_fused_moe_race-performance-2_row.top.txt | cut -c1-150
rm -f $OUT/*.ncu-rep $OUT/*.sass.csv
cd $O && tar czf logs.tgz l
