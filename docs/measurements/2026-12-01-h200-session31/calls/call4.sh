# Session 31 call 4: is the main line's fast mode (24.6 us at Qwen3-30B T=1
# when cublas_per_expert runs in the same rounds, 28.2 alone; call 3) the
# SMs' L1 / shared-memory configuration? Every kernel (the L2 flush and the
# layer's) made to prefer max shared (TILECRAFT_CARVEOUT=100) or max L1 (0).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
for W in qwen3-30b-a3b-T1 deepseek-v3-T1 qwen3-235b-a22b-T1; do
  for cv in "" 100 0; do
    for cfg in "down_preload=0,carveout=0" ""; do
      [ $W = qwen3-30b-a3b-T1 ] || [ -z "$cfg" ] || continue
      for s in main experts; do
        log=$OUT/cv_${W}_${cv:-none}_${cfg:-default}_$s.log; log=${log//,/_}; log=${log//=/}
        TILECRAFT_CARVEOUT=$cv timeout 60 build-device/tilecraft bench --op fused_moe --workload $W --warmup 2 --repeat 30 --trials 1 --scopes $s ${cfg:+--config $cfg} > $log 2>&1
        echo "$W carveout-env '${cv:-none}' config '${cfg:-default}' scopes $s: $(grep -E '^\[' $log | grep -oE 'median [0-9.]+ us \(p90 [0-9.]+\)') $(grep -E '^    experts ' $log | grep -oE 'median +[0-9.]+')"
      done
    done
  done
done
cd $O && tar czf logs.tgz l
