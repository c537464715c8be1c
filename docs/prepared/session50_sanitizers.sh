# Session 50: compute-sanitizer's racecheck (shared-memory hazards) and
# initcheck (reads of device memory never written) on every op's smoke
# workloads; neither had run on this tree's kernels (memcheck and synccheck
# had). First the CLI tests (the bounds-wording fix). DEADLINE=N (default 560).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
D=${DEADLINE:-560}
cap() { local l=$((D - SECONDS)); echo $(( $1 < l ? $1 : l )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
run() {  # name, timeout, args...
  local n=$1 t=$2; shift 2; local t0=$SECONDS
  [ $t -lt 10 ] && { echo "$n: skipped (no time left)"; return; }
  timeout $t "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? in $((SECONDS - t0))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$n.log | tail -1) | $(grep -E '^\[|PASS|FAIL' $OUT/$n.log | tail -1 | cut -c1-120)"
}
run cli_tests $(cap 90) ctest --test-dir $B -R "^Cli" -j 4 --output-on-failure
grep -E "tests passed|tests failed|Failed" $OUT/cli_tests.log | head -5
export TILECRAFT_CACHE_DIR=$PWD/$B/san_jit_cache
CS="compute-sanitizer --error-exitcode 3 --print-limit 20"
for op in moe_reduce_fused moe_topk_gate moe_fused_mapping moe_grouped_gemm fused_moe; do
  run race_$op $(cap 70) $CS --tool racecheck --racecheck-report hazard $B/tilecraft test --op $op --tag smoke --case-timeout 60
done
for op in moe_reduce_fused moe_topk_gate moe_fused_mapping moe_grouped_gemm fused_moe; do
  run init_$op $(cap 50) $CS --tool initcheck $B/tilecraft test --op $op --tag smoke --case-timeout 60
done
cd $O && tar czf logs.tgz l
