# Prepared by session 42 (its device time ran out before it could run): the
# mapping's scatter kernel summing the per-block counts over slices of blocks
# in parallel (docs/prepared/mapping_scatter_slices.patch; branch
# wip/mapping-slices). Session 42's ncu (call 5) put the scatter kernel at
# 9.5 us and the count kernel at 3.6 us at 32768 slots (Qwen3-30B T=4096):
# one thread per expert walked all 32 blocks' counts, an L2 round trip every
# few rows.
# Here, first:
#   git apply docs/prepared/mapping_scatter_slices.patch   # the working tree gets the new kernel
#   scripts/kernel_ab.sh HEAD                              # .ab_kernels/<rev>: the kernels without it
# Device (~3 min): run(command="bash docs/prepared/session43_mapping_slices.sh", carry=[".ab_kernels"])
# Merge only if the mapping tests pass (bitwise against the golden).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
R=.ab_kernels/$(ls .ab_kernels | head -1)
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
(cd $B && timeout 60 ctest -R "GpuMoeFusedMapping|GpuMoeTopkGateMapping" -j 2 --output-on-failure > $OUT/mapping_tests.log 2>&1; echo "mapping tests rc=$?")
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/mapping_tests.log | head -5
timeout 90 $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T4096 --scopes mapping,experts --warmup 2 --repeat 20 --trials 1 \
  --vs-kernels $R > $OUT/ab_qwen3_T4096.log 2>&1; echo "ab rc=$?"
timeout 40 $B/tilecraft bench --op moe_fused_mapping --workload race-case1 --warmup 2 --repeat 20 --trials 1 \
  --vs-kernels $R > $OUT/ab_mapping_race1.log 2>&1; echo "ab race1 rc=$?"
grep -hE "^\[|    (mapping|experts)(@vs)? +median|WRONG|vs:" $OUT/ab_*.log | sed -E 's/ +\(p90.*//' | cut -c1-160
cd $O && tar czf logs.tgz l
