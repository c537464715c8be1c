# Session 30 call 6: the decode combine kernel's preload (down_preload,
# chosen where it fits: Qwen3-30B T=1). GPU tests of the decode kernels,
# a same-binary A/B against down_preload=0 (three rounds: the layer, the
# experts and down scopes), and the experts scope's stamps with it.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 300 ctest -R "Decode|PerRow|Gemv|FusedCombine" -j 2 --output-on-failure > $OUT/gpu_decode.log 2>&1; echo "decode tests rc=$?"); grep -E "tests passed|Failed|\*\*\*" $OUT/gpu_decode.log | head
export OP_TIMEOUT=60 AB_ROUNDS=3 BENCH_FLAGS="--warmup 5 --repeat 20 --trials 1 --scopes experts,down"
AB_CONFIGS=";down_preload=0" scripts/device_check.sh abcfg:fused_moe:qwen3-30b-a3b-T1 >> $OUT/main.log 2>&1
grep -E "^###|median|WRONG|TIMED|rror" $OUT/abcfg_fused_moe_qwen3-30b-a3b-T1.log | sed -E 's/ +\(.*//' | cut -c1-120
for cfg in "" "--config down_preload=0"; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 --options release,trace --scopes experts \
    --warmup 2 --repeat 10 --trials 1 $cfg > "$OUT/trace_experts${cfg:+_nopreload}.log" 2>&1; echo "trace '$cfg' rc=$?"
  grep -E "^    trace|slot  [0-9]:" "$OUT/trace_experts${cfg:+_nopreload}.log" | sed 's/.*first stamp, /t0 /'
done
cd $O && tar czf logs.tgz l
