# Session 43, call 6: after call 5's two findings (the reduce's float64
# bound at subnormal ties; mma.sync's chosen ring depth under large tiles):
# GpuRandomConfigs again, the reduce and grouped GEMM suites, and the CLI
# fuzz over three more seeds.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
t0=$SECONDS
(cd $B && timeout 300 ctest -R "GpuRandomConfigs|GpuMoeReduceFused|GpuMoeGroupedGemm|DTypeSteps|MoeReduceFusedCpu" -j 4 --output-on-failure > $OUT/tests.log 2>&1; echo "tests rc=$? in $((SECONDS - t0))s")
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout|passed, .* refused" $OUT/tests.log | head -20
for s in 12 13 14; do
  t0=$SECONDS
  timeout 100 $B/tilecraft test --op fused_moe --random 50 --random-config --seed $s > $OUT/fuzz_layer_$s.log 2>&1; echo "fuzz layer seed $s rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/fuzz_layer_$s.log)"
  timeout 60 $B/tilecraft test --op moe_grouped_gemm --random 24 --random-config --seed $s > $OUT/fuzz_gemm_$s.log 2>&1; echo "fuzz gemm seed $s rc=$?: $(tail -1 $OUT/fuzz_gemm_$s.log)"
done
timeout 60 $B/tilecraft test --op moe_reduce_fused --random 16 --random-config --seed 12 > $OUT/fuzz_reduce.log 2>&1; echo "fuzz reduce rc=$?: $(tail -1 $OUT/fuzz_reduce.log)"
grep -h " FAIL " $OUT/fuzz_*.log | cut -c1-400 | head -10
cd $O && tar czf logs.tgz l
