# Session 35 call 1: session 34's prepared PART=1 (docs/prepared/session35_vs_config.sh) on wip/lean-keys (main 6b36436 + the lean keys' code back)
export PART=1
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
