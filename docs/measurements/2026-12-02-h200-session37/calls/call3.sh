# Session 37 call 3 (main with group_align chosen where an expert's weights
# take >= 16 MiB): the layer's GPU tests and the order tests, the race's
# tests, the table's rows this change touches, and the new default against
# group_align=0 on DeepSeek-V3 T=4096 in one process.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 200 ctest -L gpu -j 3 --output-on-failure -R "GpuFusedMoe|AlignedGroups|EveryCtaOrder") \
  > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"; grep -E "tests passed|Failed|\*\*\*" $OUT/gpu_tests.log | head -20
timeout 150 $B/tilecraft test --op fused_moe --tag race > $OUT/race_test.log 2>&1; echo "race test rc=$?"
tail -1 $OUT/race_test.log
. scripts/vs_bench.sh
vs fixed_ds4096 deepseek-v3-T4096 experts,gate_up,down gate_up_group_align=0,down_group_align=0
timeout 150 $B/tilecraft bench --op fused_moe --tag race --warmup 2 --repeat 10 --trials 1 > $OUT/race.log 2>&1; echo "race rc=$?"
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG|ceilings" $OUT/race.log | sed -E 's/ +\(.*//' | cut -c1-150
: > $OUT/model.log
for w in deepseek-v3-T4096 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096 deepseek-v3-T512; do
  timeout 60 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 >> $OUT/model.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG" $OUT/model.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
