# Prepared in session 33 for the next session (not yet run; on main). The
# compute-bound GEMMs run at the H200's 700 W cap, where time follows joules
# per call (session 33, call 9). Configs that lost on time in interleaved
# runs but move fewer bytes were never weighed in joules: CTA pairs with
# weights multicast (half the weights' L2 reads; sessions 16 and 32: slower
# through the pair's lockstep). This times them and takes each one's energy
# per call alone (bench --energy-ms), gate/up scope, two rounds. About 5 min.
#   run(command="bash docs/prepared/session34_energy_configs.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export OP_TIMEOUT=120 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up --energy-ms 1500"
AB_CONFIGS=";gate_up_cluster=2;gate_up_cluster=2,gate_up_multicast=1" \
  timeout 280 scripts/device_check.sh abcfg:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
AB_CONFIGS=";gate_up_multicast=1;gate_up_cluster=1" \
  timeout 280 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T4096 >> $OUT/main.log 2>&1
for w in race-performance-2 deepseek-v3-T4096; do
  grep -E "^###|gate_up |energy |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-150
done
cd $O && tar czf logs.tgz l
