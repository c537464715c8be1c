# Session 33, call 1 (branch wip/tma-row-gather rebased on main b2f2bb7):
# the row-TMA GPU tests first; then session 32's prepared ncu of our race-2
# GEMMs beside cuBLAS's loop kernels (their kernels are main's: tma=3 is a
# new instantiation only); then, if the row tests passed, gate/up A/Bs of
# tma=3 (± pairs + multicast) on race 2 and Mixtral T=4096.
grep -q "ROW_A" kernels/moe/grouped_gemm_sm90_ws.cuh || { echo "not on wip/tma-row-gather"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 200 build-device/tests/tilecraft_gpu_tests --gtest_filter='*RowTma*:GpuMoeGroupedGemm.WarpSpecialisedKernel' \
  > $OUT/row_tests.log 2>&1; echo "row tests rc=$?"; grep -aE "^\[  (PASSED|FAILED) |Failure|rror" $OUT/row_tests.log | head -20
# cuBLAS against ours (prepared: docs/prepared/session33_down_vs_cublas.sh)
timeout 90 build-device/tilecraft bench --op fused_moe --workload race-performance-2 --warmup 1 --repeat 3 \
  --trials 1 --scopes kernel_only > $OUT/warm.log 2>&1; echo "warm rc=$?"
export OP_TIMEOUT=150
NCU_KERNELS=grouped_gemm_sm90_ws NCU_SKIP=1 NCU_COUNT=2 NCU_TAG=ours \
  timeout 120 scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
NCU_KERNELS=nvjet NCU_SKIP=0 NCU_COUNT=3 NCU_TAG=cublas NCU_FLAGS="--scopes cublas_per_expert" \
  timeout 120 scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "^== ncu" $OUT/main.log
grep -hE "grouped_gemm_sm90_ws_kernel<|nvjet|Duration|SM Frequency|Compute \(SM\)|L2 Cache Throughput|Issue Slots Busy|Executed Ipc" \
  $OUT/ncu_fused_moe_race-performance-2_ours.txt $OUT/ncu_fused_moe_race-performance-2_cublas.txt | cut -c1-140
rm -f $OUT/*.ncu-rep $OUT/*.sass.csv
if grep -aq "^\[  PASSED  \] 3 tests" $OUT/row_tests.log; then
  export OP_TIMEOUT=120 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,kernel_only"
  export AB_CONFIGS=";gate_up_tma=3;gate_up_tma=3,gate_up_cluster=2,gate_up_multicast=1"
  for w in race-performance-2 mixtral-8x7b-T4096; do
    timeout 170 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
    grep -E "^###|gate_up |kernel_only |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
  done
fi
cd $O && tar czf logs.tgz l
