# Session 43, call 5: random kernel config overrides on the GPU (new:
# workload `config`, `--random-config`, GpuRandomConfigs.*): every case
# passes its golden under its overrides or is refused naming a key. Then
# the same through the CLI with another seed, and the manifest / CLI tests.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
t0=$SECONDS
(cd $B && timeout 300 ctest -R "GpuRandomConfigs|Manifest|Cli" -j 3 --output-on-failure > $OUT/config_tests.log 2>&1; echo "tests rc=$? in $((SECONDS - t0))s")
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout|passed, .* refused" $OUT/config_tests.log | head -20
t0=$SECONDS
timeout 150 $B/tilecraft test --op fused_moe --random 40 --random-config --seed 11 > $OUT/fuzz_layer.log 2>&1; echo "fuzz layer rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/fuzz_layer.log)"
t0=$SECONDS
timeout 90 $B/tilecraft test --op moe_grouped_gemm --random 30 --random-config --seed 11 > $OUT/fuzz_gemm.log 2>&1; echo "fuzz gemm rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/fuzz_gemm.log)"
grep -h "FAIL" $OUT/fuzz_*.log | cut -c1-400 | head -10
cd $O && tar czf logs.tgz l
