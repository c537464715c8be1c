# One device call, written in session 27 for the next one (not yet run).
# First, here: git apply docs/prepared/decode_split_combine_in_kernel.patch
# (against main as of session 27's end; it adds decode_split_combine, whose
# default is then 1, the combine inside the streaming kernel). Then on the
# device: bash docs/prepared/decode_split_combine_call.sh (about 3 minutes).
# Session 27 measured this combine 4-5 us slower (calls 6-8) before the
# weights went evict-first (call 9), when the partials were in DRAM; now
# they should be in L2.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 150 ctest -L gpu -R "GpuFusedMoe.DecodeSplit|GpuTrace" --timeout 140 --output-on-failure) > $OUT/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Passed" $OUT/gpu.log
AB_ROUNDS=3 OP_TIMEOUT=40 BENCH_FLAGS="--warmup 3 --repeat 20 --trials 1" AB_CONFIGS=";decode_split_combine=0" timeout 200 scripts/device_check.sh abcfg:fused_moe:deepseek-v3-T1 abcfg:fused_moe:kimi-k2-T1 >> $OUT/main.log 2>&1
for f in $OUT/abcfg_*.log; do echo "== $f"; grep -hE "###|^\[|    experts |WRONG" $f | cut -c1-100; done
timeout 60 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-T1 --warmup 2 --repeat 5 --trials 1 \
  --options release,trace > $OUT/trace.log 2>&1
grep -vE "^ *cta " $OUT/trace.log | grep -E "slot  [89]|slot 1[01]" | cut -c1-110
cd $O && tar czf logs.tgz l
