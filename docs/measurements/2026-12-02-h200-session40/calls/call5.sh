# Session 40: several A/B sides in one bench process (new: each --vs-config
# value, or each --vs-kernels directory, is a side). The CLI's GPU tests of
# it, then session 39's ex2 patch again as an A/A/B: main's kernels, a copy
# of them (the A/A: how far one process's sides drift) and the patched ones,
# on race 2 (ex2 read 1.036x slower in call 3) and Qwen3-30B T=4096 (0.991x).
# Last, Qwen3-30B T=4096's down projection under four configs in one process.
# Run from the repository root on the GPU machine.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device; G="--warmup 2 --repeat 10 --trials 1"
(cd $B && timeout 200 ctest -R "Cli\.BenchVs" --output-on-failure) > $OUT/cli_vs.log 2>&1
echo "cli vs tests rc=$?"; grep -E "tests passed|tests failed|Failed" $OUT/cli_vs.log | head
rm -rf .ab_kernels/same .ab_kernels/ex2 && mkdir -p .ab_kernels/same .ab_kernels/ex2
cp -r kernels/. .ab_kernels/same/ && cp -r kernels/. .ab_kernels/ex2/
(cd .ab_kernels/ex2 && patch -p2 < ../../docs/prepared/silu_ex2.patch) > $OUT/patch.log 2>&1; echo "patch rc=$?"
for w in race-performance-2 qwen3-30b-a3b-T4096; do
  timeout 150 $B/tilecraft bench --op fused_moe --workload $w $G --scopes experts,gate_up \
    --vs-kernels .ab_kernels/same .ab_kernels/ex2 > $OUT/aab_$w.log 2>&1; echo "== $w rc=$?"
  grep -E "WRONG|ERROR|^    vs[0-9]: |^    [a-z_]+(@vs[0-9])? +median" $OUT/aab_$w.log | sed -E 's/ +\(.*//' | cut -c1-120
done
# Qwen3-30B T=4096's down projection (L2-bound) under four other configs at once.
timeout 150 $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T4096 $G --scopes down \
  --vs-config down_stages=3 down_group_m=4 down_group_m=16 down_block_n=128 > $OUT/down_sweep.log 2>&1
echo "== down sweep rc=$?"
grep -E "WRONG|ERROR|^    vs[0-9]: |^    down(@vs[0-9])? +median" $OUT/down_sweep.log | sed -E 's/ +\(.*//' | cut -c1-120
cd $O && tar czf logs.tgz l
