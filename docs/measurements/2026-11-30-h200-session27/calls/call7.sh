# Call 7: why the combine in the streaming kernel lost 5 us (call 6):
# traced DeepSeek-V3 T=1 with it (slots 9-11: before the CTAs' barrier,
# past it, share stored) and with decode_split_combine=0.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
for c in 1 0; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload deepseek-v3-T1 --warmup 2 --repeat 5 --trials 1 \
    --options release,trace --config decode_split_combine=$c > $OUT/trace_c$c.log 2>&1
  echo "== decode_split_combine=$c"; grep -vE "^ *cta " $OUT/trace_c$c.log | grep -E "experts|trace|slot" | cut -c1-110
done
cd $O && tar czf logs.tgz l
