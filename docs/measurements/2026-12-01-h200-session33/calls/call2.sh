# Session 33, call 2 (branch wip/bk32, 08aa0da): the 32-wide k-step GPU
# tests (golden over every form of the warp-specialised kernel, and the
# layer's bits against 64-wide steps), then gate/up and down A/Bs of bk=32
# (8 stages) against the default on race 2 and DeepSeek-V3 T=4096.
grep -q "int BK = kGemmBK" kernels/moe/grouped_gemm_sm90_ws.cuh || { echo "not on wip/bk32"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
timeout 220 build-device/tests/tilecraft_gpu_tests --gtest_filter='*ThirtyTwo*' > $OUT/bk32_tests.log 2>&1
echo "bk32 tests rc=$?"; grep -aE "^\[  (PASSED|FAILED) |Failure|rror" $OUT/bk32_tests.log | head -20
if grep -aq "^\[  PASSED  \] 2 tests" $OUT/bk32_tests.log; then
  export OP_TIMEOUT=120 AB_ROUNDS=2 BENCH_FLAGS="--warmup 2 --repeat 10 --trials 1 --scopes gate_up,down,kernel_only"
  export AB_CONFIGS=";gate_up_bk=32;down_bk=32"
  for w in race-performance-2 deepseek-v3-T4096; do
    timeout 200 scripts/device_check.sh abcfg:fused_moe:$w >> $OUT/main.log 2>&1
    grep -E "^###|gate_up |down |kernel_only |WRONG|TIMED|rror" $OUT/abcfg_fused_moe_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
  done
fi
cd $O && tar czf logs.tgz l
