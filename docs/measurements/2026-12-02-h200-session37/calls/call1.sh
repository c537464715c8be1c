# Session 37 call 1: expert-aligned groups (group_align, new; kernel code
# first run here). The GPU tests that walk the grouped order, then each layer
# with group_align=3 against the default (groups of exactly 8) in one
# process (bench --vs-config: the ratio is aligned time over default time),
# and ncu DRAM bytes of DeepSeek-V3 T=4096's two GEMMs both ways.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 420 ctest -L gpu -j 3 --output-on-failure \
  -R "AlignedGroups|EveryCtaOrder|PersistentWarpSpecialisedKernel|CtaPairs|DefaultPairs|FusedCombineKeeps|GpuFusedMoe.SmokeCases") \
  > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"; grep -E "tests passed|Failed|\*\*\*" $OUT/gpu_tests.log | head -20
. scripts/vs_bench.sh
both=gate_up_group_align=3,down_group_align=3
vs align_ds4096_a deepseek-v3-T4096 experts,gate_up,down $both
vs align_ds4096_b deepseek-v3-T4096 experts,gate_up,down $both
vs align_mixtral4096 mixtral-8x7b-T4096 experts,gate_up,down $both
vs align_qwen30_4096 qwen3-30b-a3b-T4096 experts,down down_group_align=3
vs align_kimi4096 kimi-k2-T4096 experts,down down_group_align=3
vs align_qwen235_4096 qwen3-235b-a22b-T4096 experts,down down_group_align=3
vs align_race1 race-performance-1 experts,gate_up,down $both
for side in default aligned; do
  cfg=""; [ $side = aligned ] && cfg="--config gate_up_group_align=3 --config down_group_align=3"
  timeout 200 ncu --kernel-name-base demangled --kernel-name "regex:grouped_gemm_sm90_ws_kernel<__nv_bfloat16" \
    --launch-count 2 --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum \
    $B/tilecraft bench --op fused_moe --workload deepseek-v3-T4096 --warmup 0 --repeat 1 --trials 1 --scopes kernel_only $cfg \
    > $OUT/ncu_ds4096_$side.txt 2>&1; echo "ncu $side rc=$?"
  grep -E "ws_kernel<|dram__bytes|lts__t_bytes|gpu__time" $OUT/ncu_ds4096_$side.txt | sed -E 's/\(GroupedGemm.*//' | cut -c1-120 | head -12
done
cd $O && tar czf logs.tgz l
