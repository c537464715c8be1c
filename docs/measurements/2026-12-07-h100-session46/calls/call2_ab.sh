# Session 46, call 2 (after session46_checks.sh passed): one-process A/B of
# the fused combine (combine warps inside the down GEMM, opt-in
# fused_combine=1) against the default chain, on the two workloads where the
# separate combine is the largest share of the remaining gap (Qwen3-30B
# T=4096: 632 vs <= 600 us, combine 37 us; race performance case 2).
# DEADLINE=N cuts it to N seconds.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
D=${DEADLINE:-400}
left() { echo $((D - SECONDS)); }
cap() { local l=$(left); echo $(( $1 < l ? $1 : l )); }
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
for w in qwen3-30b-a3b-T4096 race-performance-2 mixtral-8x7b-T4096; do
  t=$(cap 120); [ $t -lt 20 ] && { echo "$w: skipped (no time left)"; continue; }
  t0=$SECONDS
  timeout $t $B/tilecraft bench --op fused_moe --workload $w --scopes experts \
    --warmup 2 --repeat 10 --trials 1 --vs-config fused_combine=1 > $OUT/ab_fused_combine_$w.log 2>&1
  echo "A/B $w rc=$? in $((SECONDS - t0))s"; grep -iE "experts|vs|config" $OUT/ab_fused_combine_$w.log | head -12
done
cd $O && tar czf logs.tgz l
