# Session 31 call 8: the final tree (flush: evict_last pass + back to normal;
# decode preload off by default again). Tests touching the flush, the
# decode preload and the bench CLI; the decode rows with every scope.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 150 ctest -R "GpuRuntime|Harness|DecodePreload|Cli\." --output-on-failure > $OUT/tests.log 2>&1; echo "tests rc=$?"; grep -E "tests passed|Failed" $OUT/tests.log | head -3)
: > $OUT/decode.log
for w in qwen3-30b-a3b-T1 qwen3-235b-a22b-T1 deepseek-v3-T1; do
  timeout 60 build-device/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 20 --trials 1 >> $OUT/decode.log 2>&1; echo "$w rc=$?"
done
grep -hE "^\[|    experts |    cublas_per_expert |    kernel_only |WRONG" $OUT/decode.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
