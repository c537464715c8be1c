# Session 39 call 7: gemm_silu without the IEEE division (whose slow path
# the gate values of unit-normal data reach): the gated forms on randn data
# again (call 5: 3330-3457 us against plain 2528 on Mixtral), then the GPU
# tests of every kernel that calls it (grouped GEMMs, layers) and the race.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
export PYTHONPATH=$PWD/$B/python TILECRAFT_CACHE_DIR=/tmp/tilecraft_cache
timeout 80 python3 scripts/torch_grouped_mm_bench.py --tilecraft --gated --repeat 10 --shape 8,1024,28672,4096 \
  --shape 128,256,1536,2048 > $OUT/gated.txt 2>&1
echo "gated rc=$?"; cat $OUT/gated.txt
(cd $B && timeout 250 ctest -L gpu -j 6 -R "GpuMoeGroupedGemm|GpuFusedMoe" --output-on-failure) > $OUT/gpu.log 2>&1
echo "gpu rc=$?"; grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" $OUT/gpu.log | head
timeout 60 $B/tilecraft test --op fused_moe --tag race > $OUT/race.log 2>&1; echo "race rc=$?"; tail -3 $OUT/race.log
cd $O && tar czf logs.tgz l
