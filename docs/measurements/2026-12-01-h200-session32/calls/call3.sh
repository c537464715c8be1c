# Session 32 call 3 (main, aa16564): where CTA pairs lose on race 2's
# gate/up (call 2: +30% cycles without multicast, +45% with, every SM busy,
# more long-scoreboard stalls): warp stalls per SASS instruction, one CTA
# against pairs against pairs + multicast (launch 1: the router GEMM is 0).
# Then the race table under the two-pass flush (session 31 re-measured only
# the T=1 rows under it): the cuBLAS loop ratios.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export NCU_KERNELS=grouped_gemm_sm90_ws NCU_SKIP=1 NCU_LINES=28 OP_TIMEOUT=150
NCU_TAG=one scripts/device_check.sh ncusrc:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
NCU_TAG=pairs NCU_FLAGS="--config gate_up_cluster=2" scripts/device_check.sh ncusrc:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
NCU_TAG=mc NCU_FLAGS="--config gate_up_cluster=2 --config gate_up_multicast=1" scripts/device_check.sh ncusrc:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -E "^== ncusrc" $OUT/main.log
timeout 150 build-device/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |    layer |WRONG|ceiling" $OUT/race.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
