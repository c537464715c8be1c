# Session 52: racecheck_clean_tile_ring.patch, for real this time (session
# 52's call ran main's kernels on both sides: the helper's `git apply` in a
# subdirectory skipped the patch's paths; fixed). Any GPU; ~5 min;
# DEADLINE=N cuts it. Then the grouped GEMM's `--tag large` cases that the
# 120 s cap cut (one took 72 s on an H100).
. scripts/device_steps.sh
build_tree
patched_kernels tile_ring docs/prepared/racecheck_clean_tile_ring.patch  # must say "applied: 1 file(s) differ"
run race_patched 60 $CS --tool racecheck --racecheck-report hazard $B/tilecraft test --op fused_moe --tag smoke --options release,kernels=$KP/kernels
PAIRS="--op fused_moe --workload qwen-like-skewed --config gate_up_cluster=2,down_cluster=2"
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
run large_gemm 400 $B/tilecraft test --op moe_grouped_gemm --tag large --case-timeout 150
pack_logs
