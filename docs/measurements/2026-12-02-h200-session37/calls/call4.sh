# Session 37 call 4 (the tree of call 3): DeepSeek-V3 T=4096 again in two
# more processes, and Kimi-K2 T=4096 (its down projection now aligned: 29 MB
# per expert) against group_align=0 in one process.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
for i in 1 2; do
  timeout 60 $B/tilecraft bench --op fused_moe --workload deepseek-v3-T4096 --warmup 2 --repeat 10 --trials 1 > $OUT/ds4096_$i.log 2>&1
  echo "ds4096 $i rc=$?"; grep -hE "^\[|    experts |    kernel_only |WRONG|ceilings \(" $OUT/ds4096_$i.log | sed -E 's/ +\(.*//' | cut -c1-150
done
. scripts/vs_bench.sh
vs fixed_kimi4096 kimi-k2-T4096 experts,down down_group_align=0
cd $O && tar czf logs.tgz l
