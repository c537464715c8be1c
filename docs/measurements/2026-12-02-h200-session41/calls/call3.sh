# Session 41, call 3: call 2 found 128-row tiles 0.845x (kernel_only) at
# Mixtral T=256, 64 rows per expert, where the heuristic picks 64-row tiles
# (rows per expert <= 64). Where does the crossing lie, and is it spill
# (experts over 64 rows need a second 64-row tile that re-reads their
# weights)? Ad-hoc shapes at 32-64 rows per expert, block_m=128 as a side.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror; G="--warmup 2 --repeat 10 --trials 1"
if [ -d $B ]; then cmake --build $B -j16; else make build BUILD_DIR=$B; fi > $OUT/build.log 2>&1; echo "build rc=$?"
i=0
for s in T=128,H=4096,I=14336,E=8,K=2 T=192,H=4096,I=14336,E=8,K=2 \
         T=768,H=2048,I=768,E=128,K=8 T=1024,H=2048,I=768,E=128,K=8 \
         T=1024,H=4096,I=1536,E=128,K=8 T=2048,H=7168,I=2048,E=256,K=8 T=1536,H=7168,I=2048,E=256,K=8; do
  i=$((i+1))
  timeout 100 $B/tilecraft bench --op fused_moe --shape "$s,dtype=bf16,routing=uniform,renormalize=true" $G \
    --vs-config block_m=128 > $OUT/shape$i.log 2>&1; echo "shape$i $s rc=$?"
done
grep -hE "^\[|    (experts|kernel_only|cublas_per_expert|gate_up|down)(@vs[0-9]*)? +median|WRONG|rror" $OUT/shape*.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
