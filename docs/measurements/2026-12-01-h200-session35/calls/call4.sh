# Session 35 call 4 (main, lean keys on by default): the choices made before
# the lean keys, re-read in one process each (bench --vs-config): CTA pairs
# and multicast on DeepSeek-V3 T=4096's gate/up, staggered consumers on the
# compute-bound rows, 64-row tiles and stage count on race 2.
#   run(command="bash docs/measurements/2026-12-01-h200-session35/calls/call4.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
vs() {  # vs LOGNAME WORKLOAD SCOPES CONFIG [extra bench flags]
  local name=$1 w=$2 scopes=$3 cfg=$4; shift 4
  timeout 100 $B/tilecraft bench --op fused_moe --workload "$w" --warmup 2 --repeat 10 --trials 1 \
    --scopes "$scopes" --vs-config "$cfg" "$@" > $OUT/$name.log 2>&1
  echo "== $name ($w, --vs-config $cfg): rc=$?"
  grep -E "WRONG|ERROR|error|^    [a-z_@]+ +median" $OUT/$name.log | sed -E 's/ +\(.*//' | cut -c1-150
}
S=gate_up,down,kernel_only
vs dsv3_pairs_off deepseek-v3-T4096 gate_up,kernel_only gate_up_cluster=1,gate_up_half_skip=0
vs dsv3_mc deepseek-v3-T4096 gate_up,kernel_only gate_up_multicast=1
vs dsv3_down_stagger2 deepseek-v3-T4096 down,kernel_only down_stagger=2
vs race2_stagger2 race-performance-2 $S stagger=2
vs race1_stagger2 race-performance-1 $S stagger=2
vs mixtral_stagger2 mixtral-8x7b-T4096 $S stagger=2
vs race2_pairs race-performance-2 $S gate_up_cluster=2,down_cluster=2
vs dsv3_t512_pairs deepseek-v3-T512 experts gate_up_cluster=2
cd $O && tar czf logs.tgz l
