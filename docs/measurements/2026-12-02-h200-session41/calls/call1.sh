# Session 41, call 1: what stop 40 left for the GPU, then the whole model
# table on today's board.
# 1. The README's build as a user runs it (make build, TILECRAFT_WERROR=ON,
#    g++ 13, fresh directory): the get_kernel(spec, device) overload replaced
#    the named-default workaround after stop 40's 0-warning build.
# 2. Cli.* on the GPU (Cli.BenchVsConfig gained the side-naming expectation
#    after its last GPU run; Cli.DegenerateRoutingShapesFailCleanly) and the
#    layer's CPU tests (mapping_blocks range) on this machine.
# 3. Every race and model row of fused_moe (the issue's "faster than the
#    per-expert cuBLAS loop everywhere" was last checked row by row in
#    session 28).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
t0=$SECONDS; make build BUILD_DIR=build-werror > $OUT/make_build.log 2>&1
echo "make build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
grep -E "warning:|error:" $OUT/make_build.log | head -10
B=build-werror
(cd $B && timeout 200 ctest -R "^Cli\.|FusedMoeCpu" --output-on-failure > $OUT/ctest_cli.log 2>&1; echo "ctest Cli+FusedMoeCpu rc=$?")
grep -E "tests passed|Failed|\*\*\*" $OUT/ctest_cli.log | head
G="--warmup 2 --repeat 10 --trials 1"
timeout 110 $B/tilecraft bench --op fused_moe --tag race $G > $OUT/race.log 2>&1; echo "race rc=$?"
timeout 330 $B/tilecraft bench --op fused_moe --tag model $G > $OUT/model.log 2>&1; echo "model rc=$?"
grep -hE "^\[|ceilings \(" $OUT/race.log $OUT/model.log | cut -c1-160
python3 docs/measurements/2026-12-02-h200-session41/calls/table.py $OUT/race.log $OUT/model.log > $OUT/table.md 2>&1; cat $OUT/table.md
cd $O && tar czf logs.tgz l
