# Call 2 (tree as call 1): router GEMM tiles above half the SMs, one binary,
# two rounds: the default against 64-row warp-specialised tiles of 128, 64
# and 256 columns, at DeepSeek-V3 T = 1024, 2048, 4096 and Qwen3-30B T=4096.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
M=docs/measurements/2026-11-30-h200-session26/router_prefill.yaml
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export AB_ROUNDS=2 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 1 --repeat 5 --trials 1 --manifest $M"
export AB_CONFIGS=";router_block_m=64 router_sm90=2 router_block_n=128;router_block_m=64 router_sm90=2 router_block_n=64;router_block_m=64 router_sm90=2 router_block_n=256"
timeout 480 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-router-T4096 abcfg:fused_moe:deepseek-v3-router-T2048 abcfg:fused_moe:deepseek-v3-router-T1024 abcfg:fused_moe:qwen3-30b-a3b-router-T4096 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|    routing " $f | cut -c1-60; done
cd $O && tar czf logs.tgz l
