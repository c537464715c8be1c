# Session 32 call 4 (main). (1) Is the gate/up GEMM latency-bound on its
# ring? Call 3's ncusrc had its consumer warps waiting on full stages ~23%
# of their samples with one CTA per tile: if depth matters, 3 stages lose
# clearly against 4. (2) cuBLAS's kernel on race 2's per-expert GEMM, for
# the same stall profile. (3) The model rows under the two-pass flush.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export OP_TIMEOUT=120 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down"
export AB_CONFIGS=";gate_up_stages=3,down_stages=3"
for w in race-performance-2 deepseek-v3-T4096; do
  timeout 200 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
  grep -E "^###|gate_up |down |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
NCU_KERNELS=nvjet NCU_SKIP=0 NCU_LINES=20 NCU_TAG=cublas NCU_FLAGS="--scopes cublas_per_expert" \
  scripts/device_check.sh ncusrc:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "^== ncusrc" $OUT/main.log; grep -E "nvjet|Duration|L2 Cache Thr|Compute \(SM\)|Registers" $OUT/ncusrc_*cublas.txt | cut -c1-120
: > $OUT/model.log
for w in deepseek-v3-T16 deepseek-v3-T512 deepseek-v3-T4096 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/model.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG|ceilings:" $OUT/model.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
