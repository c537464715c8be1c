# Sourced by device call scripts: vs LOGNAME WORKLOAD SCOPES CONFIG times
# fused_moe on WORKLOAD with CONFIG's overrides against the defaults in ONE
# bench process (--vs-config: both sides in the same rounds, so the ratio is
# free of the per-process power state), logs to $OUT/LOGNAME.log and prints
# the @vs lines. Needs B (the build directory) and OUT.
vs() {
  local name=$1 w=$2 scopes=$3 cfg=$4
  timeout 100 "$B/tilecraft" bench --op fused_moe --workload "$w" --warmup 2 --repeat 10 --trials 1 \
    --scopes "$scopes" --vs-config "$cfg" > "$OUT/$name.log" 2>&1
  echo "== $name ($w, --vs-config $cfg): rc=$?"
  grep -E "WRONG|ERROR|^    [a-z_]+@vs +median" "$OUT/$name.log" | sed -E 's/ +\(.*//' | sed -E 's/  +/ /g' | cut -c1-150
}
