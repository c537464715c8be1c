# Session 39 call 5: call 4's gated form ran 33% slower than the plain one on
# the same FLOPs (Mixtral 3450 against 2588 us). Which part: the gather
# (random permutation / identity / A by TMA without an index), or the dual
# weights and silu*up? Same tensors, alternating; the first group of each
# checked against its own product (call 4's gated check compared the wrong
# rows). Then the layer's gate/up scope for reference.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
export PYTHONPATH=$PWD/$B/python TILECRAFT_CACHE_DIR=/tmp/tilecraft_cache
timeout 150 python3 scripts/torch_grouped_mm_bench.py --tilecraft --gated --repeat 10 --shape 8,1024,28672,4096 \
  --shape 128,256,1536,2048 > $OUT/gated.txt 2>&1
echo "gated rc=$?"; cat $OUT/gated.txt
timeout 60 $B/tilecraft bench --op fused_moe --workload mixtral-8x7b-T4096 --warmup 2 --repeat 10 --trials 1 --scopes gate_up \
  > $OUT/layer.log 2>&1; echo "layer rc=$?"; grep -E "^    gate_up |ceilings" $OUT/layer.log | cut -c1-150
cd $O && tar czf logs.tgz l
