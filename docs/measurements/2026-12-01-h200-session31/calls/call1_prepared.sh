# One device call, written in session 30 for the next session (not yet run):
#   bash docs/prepared/session31_call.sh      (about 2 minutes)
# 1. Cli.BenchScopesFilter: its `--scopes main` part was written after the
#    device time ran out and has not run on a GPU yet.
# 2. Why the decode combine kernel's preload slows the whole layer at
#    Qwen3-30B T=1 (session 30 call 8: 27.7 against 25.1-25.4 us) while the
#    experts scope gains: the main line's own stamps (`--scopes main`, L2
#    flushed) with and without it, and with the carveout
#    (docs/perf/fused_moe.md, session 30).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 120 ctest -R "Cli.BenchScopesFilter" --output-on-failure > $OUT/cli_scopes.log 2>&1; echo "cli scopes rc=$?")
for cfg in "" "down_preload=1" "down_preload=1,carveout=1"; do
  for s in main experts; do
    log=$OUT/trace_${s}_${cfg:-default}.log
    timeout 60 build-device/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 --options release,trace \
      --scopes $s ${cfg:+--config $cfg} --warmup 2 --repeat 10 --trials 1 > "$log" 2>&1; echo "$s '$cfg' rc=$?"
    grep -E "^\[|^    trace|slot  [0-9]:" "$log" | sed -E 's/.*first stamp, /t0 /; s/ \[cuda\].*median/ median/' | cut -c1-110
  done
done
cd $O && tar czf logs.tgz l
