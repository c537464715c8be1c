# Call 3 (tree b0b-stmatrix, run with carry=[".ab_kernels"] from
# scripts/kernel_ab.sh 694bdc8): the GPU tests on the stmatrix epilogue and
# group_m heuristic; the epilogue against 694bdc8's kernels (same binary);
# group_m=8 against the new default where it now is 1.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 timeout 230 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "^== gpu|FAILED|tests passed" $OUT/main.log | tail -5
export AB_ROUNDS=2 OP_TIMEOUT=60 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1"
for w in race-performance-2 race-performance-1 mixtral-8x7b-T4096 qwen3-30b-a3b-T4096; do
  timeout 90 scripts/device_check.sh ab:fused_moe:$w >> $OUT/main.log 2>&1
done
for f in $OUT/ab_*.log; do echo "== $f"; grep -hE "###|    (experts|gate_up|down|kernel_only) |WRONG|rror|skipped" $f | cut -c1-75; done
export AB_CONFIGS=";group_m=8"
for w in qwen3-235b-a22b-T512 qwen3-30b-a3b-T512 deepseek-v3-T256 mixtral-8x7b-T64; do
  timeout 45 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
done
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    (experts|gate_up|down) |WRONG|rror" $f | cut -c1-75; done
cd $O && tar czf logs.tgz l
