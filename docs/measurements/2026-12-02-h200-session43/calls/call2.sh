# Prepared by session 42: the full GPU suite on main (~7 min; right after
# session43_gpu_checks.sh, while build-werror is there). Contiguous weights
# take the same strides and map strides as before (N * K), so every earlier
# test should pass unchanged; new on the GPU: the `weights: fused` smoke
# cases (GpuFusedMoe.SmokeCases) and w13 views among the random layer draws
# (GpuRandomShapes.*, odd H * I among them).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
t0=$SECONDS
(cd $B && timeout 480 ctest -L gpu -j 4 --output-on-failure > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$? in $((SECONDS - t0))s")
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
cd $O && tar czf logs.tgz l
