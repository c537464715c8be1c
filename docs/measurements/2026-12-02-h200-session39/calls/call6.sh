# Session 39 call 6: call 5's gated forms (randn data) ran 32-37% over the
# plain one on the same FLOPs while the layer's gate/up (uniform data) runs
# ~13% over: is it the data? The same comparison on the bench's uniform data.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
export PYTHONPATH=$PWD/$B/python TILECRAFT_CACHE_DIR=/tmp/tilecraft_cache
timeout 150 python3 scripts/torch_grouped_mm_bench.py --tilecraft --gated --data uniform --repeat 10 \
  --shape 8,1024,28672,4096 --shape 128,256,1536,2048 > $OUT/gated_uniform.txt 2>&1
echo "rc=$?"; cat $OUT/gated_uniform.txt
cd $O && tar czf logs.tgz l
