# Prepared in session 31 for a later session (not yet run). The L2
# eviction-priority keys of branch wip/l2-hints (down_l2_a / down_l2_w: the
# down projection's A boxes and weight boxes, 0 normal, 1 evict_first,
# 2 evict_last). Why: cuBLAS marks some of its loads evict_last (session 31
# found its lines surviving the old L2 flush), and session 11 found the
# T=4096 GEMMs L2-bound with weights read from DRAM more than once.
# Here, before the call:
#   git checkout wip/l2-hints && scripts/kernel_ab.sh main
# then run(command="bash docs/prepared/session32_l2_hints.sh", carry=[".ab_kernels"])
# (about 8 minutes). Merge only if the GPU tests pass and the default
# (keys off) ties main's kernels.
grep -q "l2_a, l2_w" kernels/moe/grouped_gemm_params.cuh || { echo "not on wip/l2-hints"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 timeout 240 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "^== gpu" $OUT/main.log
export OP_TIMEOUT=90 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes down,experts"
# The keys off against main's kernels: the keys sit at the end of the TMA
# launch struct (GroupedGemmParams unchanged: checked on the host, both
# trees put a_map at byte 256), so main's kernels read the same offsets.
AB_ANY_PARAMS=1 timeout 150 scripts/device_check.sh ab:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "^###|down |experts |WRONG|TIMED|rror" $OUT/ab_fused_moe_race-performance-2.log | sed -E 's/ +\(.*//' | cut -c1-120
export AB_CONFIGS=";down_l2_a=2;down_l2_w=1;down_l2_a=2,down_l2_w=1"
for w in deepseek-v3-T4096 qwen3-30b-a3b-T4096 race-performance-2 mixtral-8x7b-T4096; do
  timeout 200 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
  grep -E "^###|down |experts |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
cd $O && tar czf logs.tgz l
