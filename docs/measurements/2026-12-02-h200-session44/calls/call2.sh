# Session 44: the full GPU suite after the host changes (the fused combine
# refused off the dynamic scheduler; cases refused while generating become
# refused records), the race tag through the CLI, and a one-process A/B of
# the fused combine where it is allowed (~9 min).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
t0=$SECONDS
(cd $B && timeout 420 ctest -L gpu -j 4 --output-on-failure > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$? in $((SECONDS - t0))s")
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
t0=$SECONDS
timeout 120 $B/tilecraft test --tag race --case-timeout 60 > $OUT/race.log 2>&1; echo "race rc=$? in $((SECONDS - t0))s: $(tail -1 $OUT/race.log)"
t0=$SECONDS
for w in qwen3-30b-a3b-T4096 race-performance-2; do
  timeout 120 $B/tilecraft bench --op fused_moe --workload $w --scopes experts \
    --warmup 2 --repeat 10 --trials 1 --vs-config fused_combine=1 > $OUT/ab_fused_combine_$w.log 2>&1
  echo "A/B $w rc=$? in $((SECONDS - t0))s"; grep -E "experts" $OUT/ab_fused_combine_$w.log | head -8
done
cd $O && tar czf logs.tgz l
