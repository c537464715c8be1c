# Prepared in session 34 for the next session (not yet run; on main). Every
# A/B here runs in ONE process: bench --vs-config (other config overrides)
# or --vs-kernels (another tree's kernel headers) times the other side's
# lines in the same rounds as the defaults', so both share each round's
# clock and power state. Why: in session 34 the same kernels timed 2.1 or
# 2.4-2.5 ms on race 2 in separate processes (how long the 700 W cap held
# the clock back), while an A/A in one process read 0.995x and 1.001x
# (call 5). Two calls of about 6-7 min each:
#   PART=1: the GPU tests of what session 34 built after its device time
#     (GpuMoeGroupedGemm.LeanKeys, Cli.BenchVsKernels, Cli.BenchVsConfig);
#     nothing of theirs is measured if they fail. Then the two
#     instruction-lean keys, alone and together: lean_a=1 (the producer's
#     gathered A rows as addresses made once per tile: ~35 instead of ~100
#     instructions per stage) and lean_desc=1 (the consumers' MMA
#     descriptors by uniform adds: 64 instead of 102 instructions per warp
#     per k-step in race 2's gate/up), on race 2 with joules, then both on
#     race 1, Mixtral, Qwen3-30B and DeepSeek-V3 T=4096.
#   PART=2: session 34's wait-hint trees by --vs-kernels (race 2 with
#     joules, DeepSeek-V3 T=4096); stagger=2 on the compute-bound rows
#     (session 34 call 3 could not read race 2); CTA pairs with multicast in
#     joules (race 2, DeepSeek-V3 T=4096; lost on time in sessions 16 and
#     32, in separate processes).
# The lean keys live on branch wip/lean-keys (their kernel code has not run
# on a GPU). Here, before PART=1: git checkout wip/lean-keys && git rebase main
# run(command="PART=1 bash docs/prepared/session35_vs_config.sh")
# Before PART=2 (on main): scripts/kernel_ab.sh wip/wait-hint wip/producer-sleep
# run(command="PART=2 bash docs/prepared/session35_vs_config.sh", carry=[".ab_kernels"])
# A key that wins everywhere becomes the default only after the full GPU
# suite passes with it on (the default kernels change then).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
vs() {  # vs LOGNAME WORKLOAD SCOPES FLAG VALUE [extra bench flags]: FLAG --vs-config or --vs-kernels
  local name=$1 w=$2 scopes=$3 flag=$4 val=$5; shift 5
  timeout 120 $B/tilecraft bench --op fused_moe --workload "$w" --warmup 2 --repeat 10 --trials 1 \
    --scopes "$scopes" $flag "$val" "$@" > $OUT/$name.log 2>&1
  echo "== $name ($w, $flag $val): rc=$?"
  grep -E "held back|WRONG|ERROR|^    [a-z_@]+ +median|energy " $OUT/$name.log | sed -E 's/ +\(.*//' | cut -c1-150
}
if [ "${PART:-1}" = 1 ]; then
  grep -q "LEAN_DESC" kernels/moe/grouped_gemm_sm90_ws.cuh || { echo "PART=1 runs on wip/lean-keys"; exit 2; }
  (cd $B && timeout 200 ctest -R "LeanKeys|Cli.BenchVsKernels|Cli.BenchVsConfig" -j 3 --output-on-failure) \
    > $OUT/new_tests.log 2>&1
  grep -E "tests passed|tests failed|Failure|Passed|Failed" $OUT/new_tests.log | head -8
  if grep -q "LeanKeys .*Passed" $OUT/new_tests.log; then
    S=gate_up,down,kernel_only
    vs race2_lean_a race-performance-2 $S --vs-config gate_up_lean_a=1 --energy-ms 1500
    vs race2_lean_desc race-performance-2 $S --vs-config lean_desc=1 --energy-ms 1500
    vs race2_lean_both race-performance-2 $S --vs-config gate_up_lean_a=1,lean_desc=1 --energy-ms 1500
    vs race1_lean_both race-performance-1 $S --vs-config gate_up_lean_a=1,lean_desc=1
    vs mixtral_lean_both mixtral-8x7b-T4096 $S --vs-config gate_up_lean_a=1,lean_desc=1
    vs qwen_lean_both qwen3-30b-a3b-T4096 $S --vs-config gate_up_lean_a=1,lean_desc=1
    vs dsv3_lean_both deepseek-v3-T4096 $S --vs-config gate_up_lean_a=1,lean_desc=1
  fi
else
  for d in .ab_kernels/*/; do
    [ -f $d/NAME ] || continue
    n=$(tr '/' '_' < $d/NAME)
    vs race2_$n race-performance-2 gate_up,down,kernel_only --vs-kernels $d --energy-ms 1500
    vs dsv3_$n deepseek-v3-T4096 experts --vs-kernels $d
  done
  vs race2_stagger2 race-performance-2 gate_up,down,kernel_only --vs-config stagger=2 --energy-ms 1500
  vs race1_stagger2 race-performance-1 gate_up,down,kernel_only --vs-config stagger=2
  vs mixtral_stagger2 mixtral-8x7b-T4096 gate_up,down,kernel_only --vs-config stagger=2
  vs qwen_stagger2 qwen3-30b-a3b-T4096 gate_up,down,kernel_only --vs-config stagger=2
  vs race2_pairs_mc race-performance-2 gate_up --vs-config gate_up_cluster=2,gate_up_multicast=1 --energy-ms 1500
  vs dsv3_mc deepseek-v3-T4096 gate_up --vs-config gate_up_cluster=2,gate_up_multicast=1 --energy-ms 1500
fi
cd $O && tar czf logs.tgz l
