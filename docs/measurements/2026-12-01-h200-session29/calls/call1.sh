# One device call, written in session 28 for the next session (not yet run):
#   bash docs/prepared/session29_call.sh      (about 4 minutes)
# 1. DeepSeek-V3 T=512 (experts 5359 us against the 5200): its down
#    projection streams at 88% of the read ceiling (64 x 256 tiles of 32
#    k-steps, A by TMA). Config A/B: A gathered by cp.async (padding rows
#    read nothing), narrower tiles with a deeper ring (6 stages), a 2-D CTA
#    order.
# 2. ncu of race case 2's gate/up and down GEMMs (the compute-bound rows
#    where the per-expert cuBLAS loop is 10% faster): L2 throughput and the
#    shared pipe's utilisation, to test session 28's reading (operand bytes
#    per MAC; docs/perf/fused_moe.md, "Session 28").
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
AB_ROUNDS=2 OP_TIMEOUT=60 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" \
  AB_CONFIGS=";down_tma=1;down_block_n=128;down_group_m=1" \
  timeout 200 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T512 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    (experts|gate_up|down) |WRONG|rror" $f | cut -c1-90; done
# Launches matching grouped_gem in one layer call: router GEMM, gate/up, down.
NCU_SKIP=1 NCU_COUNT=2 OP_TIMEOUT=200 timeout 220 scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "grouped_gemm|Duration|lts__t_throughput|Shared is|Tensor is|highest-utilized|Max Bandwidth" $OUT/ncu_fused_moe_race-performance-2.txt | cut -c1-140 | head -30
# 3. Which kernels the cuBLAS loop and ceiling run (names carry tile, stages, cluster) and their L2/SMEM load.
NCU_TAG=cublas NCU_KERNELS="nvjet|xmma|cutlass|gemm_kernel" NCU_SKIP=0 NCU_COUNT=16 OP_TIMEOUT=170 timeout 180 scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|lts__t_throughput|Shared is|Tensor is|highest-utilized" $OUT/ncu_fused_moe_race-performance-2_cublas.txt | cut -c1-160 | head -60
cd $O && tar czf logs.tgz l
