# Session 50's sanitizer findings, followed up (one GPU, either card; ~9 min;
# DEADLINE=N cuts it). Session 50 call 2 (H100) found:
#  - racecheck: 16 "potential WAR hazards" in the warp-specialised GEMM's tile
#    ring (consumer lanes 1-31 read a slot; lane 0 releases it after
#    __syncwarp; the producer rewrites it two units later). Legal by the
#    memory model (racecheck does not follow __syncwarp into lane 0's
#    arrival); racecheck_clean_tile_ring.patch has lane 0 alone read and
#    broadcast the slot. Here: racecheck on it, its correctness, and its
#    speed against main in one process (--vs-kernels).
#  - initcheck: 28672 reads by the combine of slot rows in a fresh layer
#    workspace, all real rows the down GEMM wrote (the test passed) by TMA
#    tensor stores, which initcheck appears not to count as writes. Here: the
#    same case with the down GEMM's TMA stores off must read clean.
#  - memcheck had run on moe_reduce_fused only (session 49): here every
#    other op's smoke workloads, first.
#  - --tag large ran moe_reduce_fused only (6 of 8 variants pass, ~30 s each on the host golden);
#    here the grouped GEMM and the layer.
. scripts/device_steps.sh
build_tree
patched_kernels tile_ring docs/prepared/racecheck_clean_tile_ring.patch
for op in fused_moe moe_grouped_gemm moe_topk_gate moe_fused_mapping; do  # memcheck had run on moe_reduce_fused only
  run mem_$op 60 $CS --tool memcheck $B/tilecraft test --op $op --tag smoke --case-timeout 40
done
W=fused-gate-up
run init_default 40 $CS --tool initcheck $B/tilecraft test --op fused_moe --workload $W
run init_no_tma_store 40 $CS --tool initcheck $B/tilecraft test --op fused_moe --workload $W --config down_tma_store=0
run race_main 60 $CS --tool racecheck --racecheck-report hazard $B/tilecraft test --op fused_moe --tag smoke
run race_patched 60 $CS --tool racecheck --racecheck-report hazard $B/tilecraft test --op fused_moe --tag smoke --options release,kernels=$KP/kernels
# CTA pairs (their ring slots are written into both CTAs): racecheck on main and on the patch
PAIRS="--op fused_moe --workload qwen-like-skewed --config gate_up_cluster=2,down_cluster=2"
run race_main_pairs 40 $CS --tool racecheck --racecheck-report hazard $B/tilecraft test $PAIRS
run race_patched_pairs 40 $CS --tool racecheck --racecheck-report hazard $B/tilecraft test $PAIRS --options release,kernels=$KP/kernels
run test_patched_layer 60 $B/tilecraft test --op fused_moe --tag smoke --options release,kernels=$KP/kernels
run test_patched_gemm 60 $B/tilecraft test --op moe_grouped_gemm --tag smoke --options release,kernels=$KP/kernels
run fuzz_patched 60 $B/tilecraft test --op fused_moe --random 30 --random-config --seed 22 --case-timeout 30 --options release,kernels=$KP/kernels
run test_patched_pairs 40 $B/tilecraft test --op fused_moe --workload deepseek-v3-T4096 --options release,kernels=$KP/kernels
vs() {  # name workload: main against the patch, one process
  run vs_$1 90 $B/tilecraft bench --op fused_moe --workload $2 --warmup 2 --repeat 10 --scopes gate_up,down,experts --vs-kernels $KP/kernels
  grep -E "^    [a-z_@]+ +median" $OUT/vs_$1.log | sed -E 's/ +\(.*//' | cut -c1-150
}
vs race2 race-performance-2; vs qwen qwen3-30b-a3b-T4096; vs dsv3 deepseek-v3-T4096
run large_gemm 120 $B/tilecraft test --op moe_grouped_gemm --tag large --case-timeout 100
run large_layer 90 $B/tilecraft test --op fused_moe --tag large --case-timeout 80
pack_logs
