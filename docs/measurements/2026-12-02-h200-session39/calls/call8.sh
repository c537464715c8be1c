# Session 39 call 8 (the last ~2 device-minutes): the layer on the new silu,
# Qwen3-30B T=4096 and Mixtral T=4096 (plain bench; uniform data).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-device
cmake --build $B -j 16 > $OUT/build.log 2>&1; echo "build rc=$?"
for w in qwen3-30b-a3b-T4096 mixtral-8x7b-T4096; do
  timeout 45 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 > $OUT/$w.log 2>&1
  echo "$w rc=$?"; grep -E "^    (experts|gate_up|down|kernel_only|cublas_per_expert) |ceilings|WRONG" $OUT/$w.log | cut -c1-130
done
cd $O && tar czf logs.tgz l
