# Sourced by the one-call device scripts (docs/prepared/): logs under
# $OUT/l (packed into $OUT/logs.tgz by `pack_logs`), the tree built once in
# $B (-Werror; a second call on the same warm machine finds it), and
# `run NAME SECONDS CMD...`, which cuts each step to what is left of
# DEADLINE (default 560 s from the script's start) and prints one line: exit
# status, time, the sanitizer summary if any, the last result line.
export O=$OUT; mkdir -p "$O/l"; export OUT=$O/l
B=${B:-build-werror}
D=${DEADLINE:-560}
cap() { local l=$((D - SECONDS)); echo $(( $1 < l ? $1 : l )); }
build_tree() {
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  local t0=$SECONDS
  if [ -d "$B" ]; then cmake --build "$B" -j16 > "$OUT/make_build.log" 2>&1
  else make build BUILD_DIR="$B" > "$OUT/make_build.log" 2>&1; fi
  echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' "$OUT/make_build.log")"
}
run() {  # name, seconds, command...
  local n=$1 t; t=$(cap "$2"); shift 2; local t0=$SECONDS
  [ "$t" -lt 10 ] && { echo "$n: skipped (no time left)"; return; }
  timeout "$t" "$@" > "$OUT/$n.log" 2>&1
  echo "$n rc=$? in $((SECONDS - t0))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$n.log" | tail -1) |" \
       "$(grep -E 'tests passed|passed,|FAIL|WRONG|TIMEOUT' "$OUT/$n.log" | tail -1 | cut -c1-160)"
}
pack_logs() { (cd "$O" && tar czf logs.tgz l); }
# A copy of kernels/ with a patch applied, for --options kernels=$KP/kernels
# or --vs-kernels $KP/kernels: patched_kernels NAME PATCH sets KP to
# .ab_kernels/NAME, and the JIT cache of the steps to the build's. (Not `git
# apply` inside the copy: run in a subdirectory of the repository it skips,
# silently, every path outside that directory, so session 52's first call
# compared main with main. The copy is checked to differ from kernels/.)
# Only the patch's files under kernels/ go into the copy (a patch may carry
# the tests that land with it).
patched_kernels() {
  KP=$PWD/.ab_kernels/$1; rm -rf "$KP"; mkdir -p "$KP"; cp -r kernels "$KP/"
  awk '/^diff --git /{keep = ($3 ~ /^a\/kernels\//)} keep' "$2" > "$KP/kernels.patch"
  if ! patch -s -p1 -d "$KP" --batch --forward < "$KP/kernels.patch"; then echo "PATCH $2 FAILED"
  elif diff -rq kernels "$KP/kernels" > /dev/null; then echo "PATCH $2 CHANGED NOTHING"
  else echo "patch $2 applied: $(diff -rq kernels "$KP/kernels" | wc -l) file(s) differ"; fi
  export TILECRAFT_CACHE_DIR=$PWD/$B/patched_jit_cache
}
CS="compute-sanitizer --error-exitcode 3 --print-limit 5"
