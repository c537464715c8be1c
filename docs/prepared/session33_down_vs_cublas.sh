# Prepared in session 32 for a later session (not yet run; on main). Both of
# our race GEMMs sit near 80% "Compute (SM)" in ncu (race 2: gate/up 80.6%,
# down 80.4%) against 90.4% for cuBLAS's gate GEMM, although our down
# projection's warps already wait on their MMAs, not on data (session 30).
# Is the gap the tiles' fixed costs (race 2's down has 16 k-steps per tile)
# or how the MMAs issue? ncu with ComputeWorkloadAnalysis (pipe use) of our
# gate/up and down (launches 1-2; 0 is the router) and of cuBLAS's first
# three loop kernels (expert 0's gate, up, down: the down has our down's
# K = 1024). About 3 minutes.
#   run(command="bash docs/prepared/session33_down_vs_cublas.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
# The ceilings measured once first, so no ceiling GEMM runs under ncu.
timeout 90 build-device/tilecraft bench --op fused_moe --workload race-performance-2 --warmup 1 --repeat 3 \
  --trials 1 --scopes kernel_only > $OUT/warm.log 2>&1; echo "warm rc=$?"
export OP_TIMEOUT=150
NCU_KERNELS=grouped_gemm_sm90_ws NCU_SKIP=1 NCU_COUNT=2 NCU_TAG=ours \
  scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
NCU_KERNELS=nvjet NCU_SKIP=0 NCU_COUNT=3 NCU_TAG=cublas NCU_FLAGS="--scopes cublas_per_expert" \
  scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "^== ncu" $OUT/main.log
grep -hE "grouped_gemm_sm90_ws_kernel<|nvjet|Duration|SM Frequency|Compute \(SM\)|L2 Cache Throughput|Issue Slots Busy|Executed Ipc" \
  $OUT/ncu_fused_moe_race-performance-2_ours.txt $OUT/ncu_fused_moe_race-performance-2_cublas.txt | cut -c1-140
cd $O && tar czf logs.tgz l
