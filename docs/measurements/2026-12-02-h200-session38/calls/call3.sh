# Session 38 call 3: every random-shape GPU test (layers, layers on
# mma.sync, grouped GEMMs with cheaper draws, and the new gate / mapping /
# combine draws) on the default seed and on seed 7 (whose grouped GEMMs ran
# past the 240 s test limit in call 2: host weight generation, now capped).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
for seed in 20261202 7; do
  (cd $B && TILECRAFT_SHAPE_SEED=$seed timeout 300 ctest -L gpu -j 4 --output-on-failure -R "GpuRandomShapes") > $OUT/gpu_tests_$seed.log 2>&1
  echo "random-shape tests, seed $seed: rc=$?"; grep -E "tests passed|Test +#|\*\*\*|Timeout" $OUT/gpu_tests_$seed.log | head -8
  grep -E "^(fused_moe|moe_[a-z_]+) / .*\(seed" $OUT/gpu_tests_$seed.log | cut -c1-330 | head -12
done
cd $O && tar czf logs.tgz l
