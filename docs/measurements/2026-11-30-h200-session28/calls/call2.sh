# Call 2: 192-row warp-specialised tiles (three consumer warpgroups, block_m=192),
# opt-in. Correctness on the layer (manifest DeepSeek-V3 T=4096 and ad-hoc
# shapes), then a config A/B against the defaults on the T=4096 rows.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
S=docs/measurements/2026-11-30-h200-session28/calls/shapes192.txt
timeout 90 build-device/tilecraft test --op fused_moe --workload deepseek-v3-T4096 --config block_m=192 > $OUT/t_dsv3.log 2>&1; echo "dsv3 rc=$? $(grep -E 'PASS|FAIL|rror' $OUT/t_dsv3.log | head -3 | cut -c1-200)"
while read -r s; do
  timeout 60 build-device/tilecraft test --op fused_moe --shape "$s" --config block_m=192 > $OUT/one.log 2>&1; rc=$?
  echo "rc=$rc $(grep -E 'PASS|FAIL|rror' $OUT/one.log | head -2 | cut -c1-220)" | tee -a $OUT/shapes.log
done < $S
AB_ROUNDS=3 OP_TIMEOUT=60 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1" AB_CONFIGS=";block_m=192" timeout 330 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T4096 abcfg:fused_moe:qwen3-30b-a3b-T4096 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|^\[|    (experts|gate_up|down) |WRONG|rror" $f | cut -c1-120; done
cd $O && tar czf logs.tgz l
