# Prepared in session 32 for a later session (not yet run). Branch
# wip/no-fence-tma-a: the warp-specialised consumers skip the proxy fence
# (fence.proxy.async) after each full stage when A comes by TMA, as it does
# in every down projection: every write into a stage is then a tensor copy,
# which the barrier's transaction count publishes to wgmma. Only the TMA_A
# kernels' code changes (scripts/kernel_code_diff.py on race 2 and
# DeepSeek-V3 T=4096: 4 of 12 kernels, the gate/up ones identical). Session
# 30's ncusrc of race 2's down had its mainloop fence at 0.6% of the stall
# samples, so expect at most that: a low-priority cleanup, worth a call only
# beside another A/B of the same kernels. Here, before the call:
#   git checkout wip/no-fence-tma-a && git rebase main && scripts/kernel_ab.sh main
# then run(command="bash docs/prepared/session33_fence_ab.sh", carry=[".ab_kernels"])
# (about 8 minutes). Merge only if the GPU tests pass and down is no slower.
grep -q "if constexpr (!TMA_A) fence_async_shared" kernels/moe/grouped_gemm_sm90_ws.cuh || { echo "not on wip/no-fence-tma-a"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 timeout 240 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "^== gpu" $OUT/main.log
export OP_TIMEOUT=120 AB_ROUNDS=3 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes down,kernel_only"
for w in race-performance-2 mixtral-8x7b-T4096 deepseek-v3-T4096; do
  timeout 200 scripts/device_check.sh ab:fused_moe:$w >> $OUT/main.log 2>&1
  grep -E "^###|down |kernel_only |WRONG|TIMED|rror" $OUT/ab_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
AB_ROUNDS=2 timeout 200 scripts/device_check.sh ab:fused_moe:race-performance-1 >> $OUT/main.log 2>&1
grep -E "^###|down |kernel_only |WRONG|TIMED|rror" $OUT/ab_fused_moe_race-performance-1.log | sed -E 's/ +\(.*//' | cut -c1-120
cd $O && tar czf logs.tgz l
