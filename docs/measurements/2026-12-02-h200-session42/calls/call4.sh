# Session 42, call 4: two of issue 3's targets not re-measured since early
# sessions, with the ceilings measured in the same process:
# - the grouped GEMM on groups of >= 4096 rows against the dense cuBLAS rate
#   of a large square GEMM (>= 80%): the perf tag, plain epilogue, plus the
#   gated epilogue on the race's gate/up;
# - routing + mapping <= 15 us at T <= 256: the routing tag's gate_mapping
#   scope (router GEMM apart).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s"
R="--warmup 2 --repeat 10 --trials 1"
timeout 200 $B/tilecraft bench --op moe_grouped_gemm --variant Plain --tag perf $R > $OUT/gemm_perf.log 2>&1; echo "gemm perf rc=$?"
timeout 60 $B/tilecraft bench --op moe_grouped_gemm --variant SiluUp --workload race-case1-gateup $R > $OUT/gemm_siluup.log 2>&1; echo "gemm siluup rc=$?"
timeout 150 $B/tilecraft bench --op fused_moe --tag routing $R > $OUT/routing.log 2>&1; echo "routing rc=$?"
grep -hE "^\[|ceiling|TFLOP/s =|    (gate_mapping|routing|mapping|experts) +median" $OUT/gemm_perf.log $OUT/gemm_siluup.log $OUT/routing.log | sed -E 's/ +\(p90.*//' | cut -c1-170
cd $O && tar czf logs.tgz l
