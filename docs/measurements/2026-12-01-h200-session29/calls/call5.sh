# Call 5: cuBLAS runs race 2's GEMMs as 2x1 / 1x2 CTA clusters (call 1's
# ncu); our CTA pairs (cluster=2, with and without weight multicast) on the
# compute-bound rows, with this session's epilogue.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export AB_ROUNDS=2 OP_TIMEOUT=60 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1"
export AB_CONFIGS=";cluster=2;cluster=2 multicast=1"
for w in race-performance-2 mixtral-8x7b-T4096; do
  timeout 100 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
done
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    (experts|gate_up|down|kernel_only) |WRONG|rror" $f | cut -c1-75; done
cd $O && tar czf logs.tgz l
