# Session 51: what one short call should run first (any GPU; DEADLINE=N,
# default 560, cuts each step). Session 50's harness changes (every case's
# tensors checked against memory with the manifest's estimates) ran on the
# CPU only, so the race cases (the largest the default tags run) come first;
# then session51_sanitizer_followup.sh's steps in order of what they decide:
# memcheck on the layer and the GEMM, initcheck with the down GEMM's TMA
# stores off, the racecheck patch (hazards, correctness, speed against main).
. scripts/device_steps.sh
build_tree
patched_kernels tile_ring docs/prepared/racecheck_clean_tile_ring.patch
run race 170 $B/tilecraft test --tag race --case-timeout 60
for op in fused_moe moe_grouped_gemm; do
  run mem_$op 60 $CS --tool memcheck $B/tilecraft test --op $op --tag smoke --case-timeout 40
done
run init_no_tma_store 40 $CS --tool initcheck $B/tilecraft test --op fused_moe --workload fused-gate-up --config down_tma_store=0
run race_patched 60 $CS --tool racecheck --racecheck-report hazard $B/tilecraft test --op fused_moe --tag smoke --options release,kernels=$KP/kernels
run test_patched_layer 50 $B/tilecraft test --op fused_moe --tag smoke --options release,kernels=$KP/kernels
run vs_qwen 90 $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T4096 --warmup 2 --repeat 10 --scopes gate_up,down,experts --vs-kernels $KP/kernels
grep -E "^    [a-z_@]+ +median" $OUT/vs_qwen.log | sed -E 's/ +\(.*//' | cut -c1-150
for op in moe_topk_gate moe_fused_mapping; do
  run mem_$op 40 $CS --tool memcheck $B/tilecraft test --op $op --tag smoke --case-timeout 30
done
pack_logs
