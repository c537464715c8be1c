# Session 42, call 1 (prepared by session 41; ~9 device-minutes): what
# session 41 changed after its last GPU run, on the GPU.
# - The README's build on g++ 13 with -Werror (the grouped GEMM's host code
#   split into moe_grouped_gemm{,_config,_common}.cpp; the test files split).
# - The full GPU suite: the split test files (same 54 tests, text unchanged),
#   the REFUSED status (Cli.BenchVsConfig's invalid side now exits 2).
# Run from the repository root on the GPU machine.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
t0=$SECONDS; make build BUILD_DIR=build-werror > $OUT/make_build.log 2>&1
echo "make build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
grep -E "warning:|error:" $OUT/make_build.log | head -10
t0=$SECONDS
(cd build-werror && timeout 470 ctest -L gpu -j 4 --output-on-failure > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$? in $((SECONDS - t0))s")
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
cd $O && tar czf logs.tgz l
