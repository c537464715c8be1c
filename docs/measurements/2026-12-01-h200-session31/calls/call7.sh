# Session 31 call 7: the flush with its second pass setting lines back to normal priority (call 6 re-read them evict_first and left evict_last lines behind). Is the main line's fast mode at Qwen3-30B T=1 (24.6 us
# beside cublas_per_expert, 28.2 alone; call 3) L2 lines the plain read
# flush cannot evict (cuBLAS marking its weight reads evict_last)? The same
# pairs under the new two-pass flush (read) and the old one (plain); then
# what the new flush does to a GEMM case and to DeepSeek-V3 T=1.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 100 ctest -R "GpuRuntime|Harness" --output-on-failure > $OUT/tests.log 2>&1; echo "tests rc=$?"; grep -E "tests passed|Failed" $OUT/tests.log | head -3)
W=qwen3-30b-a3b-T1
for fl in plain read; do
  for cfg in "down_preload=0,carveout=0" ""; do
    for sc in main main,cublas_per_expert experts; do
      log=$OUT/fl_${fl}_${cfg:-default}_${sc}.log; log=${log//,/_}; log=${log//=/}
      timeout 60 build-device/tilecraft bench --op fused_moe --workload $W --warmup 2 --repeat 30 --trials 1 --flush $fl --scopes $sc ${cfg:+--config $cfg} > $log 2>&1
      echo "flush $fl config '${cfg:-default}' scopes $sc: $(grep -E '^\[' $log | grep -oE 'median [0-9.]+ us \(p90 [0-9.]+\)') experts $(grep -E '^    experts ' $log | grep -oE 'median +[0-9.]+') | $(grep -oE 'empty kernel under this run.s protocol: [0-9.]+ us' $log)"
    done
  done
done
for w in deepseek-v3-T1 race-performance-2; do
  for fl in plain read; do
    timeout 90 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --trials 1 --flush $fl --scopes experts,kernel_only > $OUT/fl_${w}_$fl.log 2>&1
    echo "$w flush $fl: $(grep -E '^\[' $OUT/fl_${w}_$fl.log | grep -oE 'median [0-9.]+ us') $(grep -E '^    (experts|kernel_only) ' $OUT/fl_${w}_$fl.log | sed -E 's/ +\(.*//; s/ +/ /g' | tr '\n' ' ')"
  done
done
cd $O && tar czf logs.tgz l
