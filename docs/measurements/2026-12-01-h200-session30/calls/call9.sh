# Session 30 call 9: the final tree (preload off by default): the GPU tests
# of the decode kernels and the layer, and Qwen3-30B T=1 once.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
(cd build-device && timeout 300 ctest -L gpu -R "Decode|PerRow|Gemv|FusedMoe" -j 3 --output-on-failure > $OUT/gpu_final.log 2>&1; echo "gpu tests rc=$?"); grep -E "tests passed|Failed|\*\*\*" $OUT/gpu_final.log | head
timeout 60 build-device/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T1 --warmup 2 --repeat 10 --trials 1 > $OUT/qwen3_30b_t1.log 2>&1; echo "bench rc=$?"
grep -E "^\[|    experts " $OUT/qwen3_30b_t1.log | sed -E 's/ +\(.*//; s/ \[cuda\].*median/ median/' | cut -c1-120
cd $O && tar czf logs.tgz l
