# Session 32 call 6 (main): where does the bulk gate/up start to win at T=1?
# Call 5 under the two-pass flush: Qwen3-235B (1.52 MB of gate/up weights
# per SM) bulk 81.9-82.4 against 84.2-84.6 us; Qwen3-30B (0.38 MB) 30.5-30.7
# against 29.0-29.3. The default takes bulk from 2 MB per SM. Ad-hoc T=1
# shapes in between (E=128, K=8, softmax top-k, bf16), three rounds each,
# default against gate_up_bulk=1; layer (main) and experts scopes.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
: > $OUT/bulk.log
for hi in 2048,1024 2048,1536 4096,1024 3072,1536 4096,1536 5120,1536; do
  H=${hi%,*} I=${hi#*,}
  S="T=1,K=8,H=$H,I=$I,E=128,mode=softmax_topk,renormalize=true,dtype=bf16"
  for r in 1 2 3; do
    for c in "" "--config gate_up_bulk=1"; do
      echo "### H=$H I=$I round $r ${c:-default}" >> $OUT/bulk.log
      timeout 60 build-device/tilecraft bench --op fused_moe --shape "$S" --warmup 2 --repeat 30 --trials 1 \
        --scopes experts $c >> $OUT/bulk.log 2>&1
    done
  done
done
grep -E "^###|^\[|experts |WRONG|rror" $OUT/bulk.log | sed -E 's/ +\(.*//; s/fused_moe.Default.shape:T=1,K=8,//' | cut -c1-110
cd $O && tar czf logs.tgz l
