# One device call, written in session 29 for the next session (not yet run):
#   bash docs/prepared/session30_call.sh      (about 3 minutes)
# 1. Where race 2's down projection stalls with the stmatrix epilogue
#    (session 29 call 2 had the epilogue at 10.8% of the stall samples,
#    half of it generic stores): the share left for a ping-pong or
#    cluster design to hide. Sum by region with
#    docs/measurements/2026-12-01-h200-session29/calls/ncusrc_regions.py
#    after re-reading the region bounds off the new listing.
# 2. Qwen3-30B T=1 (experts 28.4 against the layer's 25.2 us): the layer's
#    per-CTA phase stamps. (bench prints the stamps of each traced kernel's
#    last launch, which is official_e2e's layer call, not the experts
#    scope's: timing the experts scope's stamps needs a way to run one
#    scope, which bench does not have yet.)
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
NCU_SKIP=2 NCU_LINES=40 OP_TIMEOUT=150 timeout 160 scripts/device_check.sh ncusrc:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
head -45 $OUT/ncusrc_fused_moe_race-performance-2.top.txt; rm -f $OUT/*.ncu-rep
timeout 60 build-device/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 --options release,trace \
  --warmup 2 --repeat 10 --trials 1 > $OUT/trace_qwen3_30b_t1.log 2>&1; echo "trace rc=$?"
grep -vE "^\[" $OUT/trace_qwen3_30b_t1.log | head -60
cd $O && tar czf logs.tgz l
