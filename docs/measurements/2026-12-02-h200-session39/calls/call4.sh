# Session 39 call 4: (a) our gate/up form (A gathered, W in halves, silu*up,
# half the stores) against the plain form and CUTLASS on the same FLOPs and
# tensors, alternating; (b) our CTA pairs (with and without multicast, the
# form CUTLASS's kernel uses: 2x1 clusters) against CUTLASS on the same
# tensors: do ours lose where theirs do not?
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
export PYTHONPATH=$PWD/$B/python TILECRAFT_CACHE_DIR=/tmp/tilecraft_cache
M=8,1024,28672,4096; Q=128,256,1536,2048
timeout 120 python3 scripts/torch_grouped_mm_bench.py --tilecraft --gated --repeat 10 --shape $M --shape $Q > $OUT/gated.txt 2>&1
echo "gated rc=$?"; cat $OUT/gated.txt
for c in cluster=2,multicast=1 cluster=2; do
  timeout 100 python3 scripts/torch_grouped_mm_bench.py --tilecraft --config $c --repeat 10 --shape $M --shape $Q > $OUT/pairs_${c//[=,]/_}.txt 2>&1
  echo "$c rc=$?"; cat $OUT/pairs_${c//[=,]/_}.txt
done
cd $O && tar czf logs.tgz l
