# Session 50, most important first: the CLI tests (the bounds-wording fix);
# `tilecraft test --tag large` (tensors past 2^31 elements, never run);
# compute-sanitizer's racecheck (shared-memory hazards) and initcheck (reads
# of device memory never written) on the smoke workloads, the grouped GEMM
# and the layer first; neither tool had run on these kernels (memcheck and
# synccheck had). DEADLINE=N (default 560).
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
run large $(cap 200) $B/tilecraft test --tag large --case-timeout 120
grep -E "PASS|FAIL|ERROR|passed|failed" $OUT/large.log | cut -c1-220 | head -20
CS="compute-sanitizer --error-exitcode 3 --print-limit 20"
rc() { run race_$1 $(cap $2) $CS --tool racecheck --racecheck-report hazard $B/tilecraft test --op $1 --tag smoke --case-timeout 60; }
ic() { run init_$1 $(cap $2) $CS --tool initcheck $B/tilecraft test --op $1 --tag smoke --case-timeout 60; }
rc moe_grouped_gemm 70; rc fused_moe 70; ic moe_grouped_gemm 45; ic fused_moe 45
for op in moe_reduce_fused moe_topk_gate moe_fused_mapping; do rc $op 30; done
for op in moe_reduce_fused moe_topk_gate moe_fused_mapping; do ic $op 30; done
cd $O && tar czf logs.tgz l
