# Session 36 call 4: fill_stores (padding rows not stored; chosen up to 4
# row tiles per expert). Its kernel code runs here first: the GPU tests that
# touch it, then each layer against every row stored, in one process
# (bench --vs-config gate_up_fill_stores=0,down_fill_stores=0: the ratio is
# the old way's time over the new default's).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
(cd $B && timeout 300 ctest -L gpu -j 3 --output-on-failure \
  -R "FillStores|HalfSkip|CtaPairs|DeterministicBits|CudaGraph|DependentLaunch|GpuFusedMoe.SmokeCases|LayerGemmStamps|WarpSpecialisedKernel|FusedCombine") \
  > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"; grep -E "tests passed|Failed|\*\*\*" $OUT/gpu_tests.log | head -20
. scripts/vs_bench.sh
off=gate_up_fill_stores=0,down_fill_stores=0
for w in deepseek-v3-T512 deepseek-v3-T64 deepseek-v3-T4096 qwen3-30b-a3b-T4096 qwen3-235b-a22b-T4096 kimi-k2-T512 mixtral-8x7b-T512; do
  vs fill_$w $w experts,gate_up,down $off
done
cd $O && tar czf logs.tgz l
