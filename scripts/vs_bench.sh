# Sourced by device call scripts: vs LOGNAME WORKLOAD SCOPES CONFIG... times
# fused_moe on WORKLOAD with each CONFIG's overrides (one A/B side each)
# against the defaults in ONE bench process (--vs-config: every side in the
# same rounds, so the ratios are free of the per-process power state), logs
# to $OUT/LOGNAME.log and prints the @vs lines (@vs1, @vs2, ... with
# several sides). Needs B (the build directory) and OUT.
vs() {
  local name=$1 w=$2 scopes=$3
  shift 3
  timeout 100 "$B/tilecraft" bench --op fused_moe --workload "$w" --warmup 2 --repeat 10 --trials 1 \
    --scopes "$scopes" --vs-config "$@" > "$OUT/$name.log" 2>&1
  echo "== $name ($w, --vs-config $*): rc=$?"
  grep -E "WRONG|ERROR|^    vs[0-9]*: |^    [a-z_]+@vs[0-9]* +median" "$OUT/$name.log" | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g' | cut -c1-150
}
