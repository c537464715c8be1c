# Session 32 call 8 (the committed tree: bulk gate/up from 896 KiB per SM,
# two columns per piece where four stages fit, key bulk_cols): the T=1 rows
# whose default changed, against the golden, then timed with every scope.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
S="T=1,H=5120,I=1536,E=128,K=8,mode=softmax_topk,renormalize=true,dtype=bf16"
timeout 60 build-device/tilecraft test --op fused_moe --workload qwen3-235b-a22b-T1 > $OUT/test.log 2>&1; echo "test rc=$?"
timeout 40 build-device/tilecraft test --op fused_moe --shape "$S" >> $OUT/test.log 2>&1; echo "test rc=$?"
grep -aE "PASS|FAIL" $OUT/test.log | cut -c1-120
timeout 40 build-device/tilecraft bench --op fused_moe --workload qwen3-235b-a22b-T1 --warmup 2 --repeat 20 --trials 1 > $OUT/bench.log 2>&1
timeout 40 build-device/tilecraft bench --op fused_moe --shape "$S" --warmup 2 --repeat 20 --trials 1 >> $OUT/bench.log 2>&1
grep -aE "^\[|    experts |    gate_up |    down |    kernel_only |WRONG|ceilings:" $OUT/bench.log | sed -E 's/ +\(.*//' | cut -c1-130
cd $O && tar czf logs.tgz l
