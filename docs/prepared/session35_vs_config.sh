# Prepared in session 34 for the next session (not yet run; on main). Every
# A/B here runs in ONE process with bench --vs-config: the other overrides'
# lines are timed in the same rounds as the defaults', so both sides share
# each round's clock and power state. Why: in session 34 the same kernels
# timed 2.1 or 2.4-2.5 ms on race 2 in separate processes (how long the
# 700 W cap held the clock back), while an A/A in one process read 0.995x
# and 1.001x (call 5). Session 33's and 34's config A/Bs on the
# compute-bound rows were separate processes; these re-judge them:
#   stagger=N (session 34: consumer warpgroup 1 N k-steps behind 0, so each
#     epilogue runs under the other's MMAs; call 3 unreadable on race 2,
#     Qwen3-30B T=4096 down 1.4% slower, Mixtral down 1-2% faster);
#   CTA pairs with multicast (half the weights' L2 reads; lost on time in
#     sessions 16 and 32 in separate processes), with joules per call.
#   lean_a=1 (session 34, CPU-built only: the producer's gathered A rows
#     as addresses made once per tile; ~35 instead of ~100 instructions per
#     stage for its 8 chunks, where the producer issued twice the consumers'
#     instructions). Its GPU test runs first: nothing about it is measured
#     if LeanProducerA fails.
# About 8 min.
#   run(command="bash docs/prepared/session35_vs_config.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 150 ctest -L gpu -R "LeanProducerA|StaggeredConsumers" --output-on-failure) > $OUT/new_keys_tests.log 2>&1
grep -E "tests passed|tests failed|Failure" $OUT/new_keys_tests.log | head -5
grep -q "100% tests passed" $OUT/new_keys_tests.log && LEAN_OK=1 || LEAN_OK=0
vs() {  # vs LOGNAME WORKLOAD SCOPES VS_CONFIG [extra bench flags]
  local name=$1 w=$2 scopes=$3 cfg=$4; shift 4
  timeout 90 $B/tilecraft bench --op fused_moe --workload "$w" --warmup 2 --repeat 10 --trials 1 \
    --scopes "$scopes" --vs-config "$cfg" "$@" > $OUT/$name.log 2>&1
  echo "== $name ($w, --vs-config $cfg): rc=$?"
  grep -E "held back|WRONG|ERROR|^    [a-z_@]+ +median|energy " $OUT/$name.log | sed -E 's/ +\(.*//' | cut -c1-150
}
if [ $LEAN_OK = 1 ]; then
  for i in 1 2; do
    vs race2_lean_$i race-performance-2 gate_up gate_up_lean_a=1 --energy-ms 1500
  done
  vs race1_lean race-performance-1 gate_up gate_up_lean_a=1
  vs mixtral_lean mixtral-8x7b-T4096 gate_up gate_up_lean_a=1
  vs qwen_lean qwen3-30b-a3b-T4096 gate_up gate_up_lean_a=1
  vs dsv3_lean deepseek-v3-T4096 gate_up gate_up_lean_a=1
fi
vs race2_stagger2 race-performance-2 gate_up,down,kernel_only stagger=2 --energy-ms 1500
vs race1_stagger2 race-performance-1 gate_up,down,kernel_only stagger=2
vs mixtral_stagger2 mixtral-8x7b-T4096 gate_up,down,kernel_only stagger=2
vs qwen_stagger2 qwen3-30b-a3b-T4096 gate_up,down,kernel_only stagger=2
vs race2_pairs_mc race-performance-2 gate_up gate_up_cluster=2,gate_up_multicast=1 --energy-ms 1500
vs dsv3_mc deepseek-v3-T4096 gate_up gate_up_cluster=2,gate_up_multicast=1 --energy-ms 1500
cd $O && tar czf logs.tgz l
