. scripts/device_steps.sh
build_tree
run gpu_suite 240 ctest --test-dir $B -L gpu -j 6 --output-on-failure
patched_kernels tile_ring docs/prepared/racecheck_clean_tile_ring.patch
for i in 1 2; do for w in race-performance-2 qwen3-30b-a3b-T4096; do
  run vs_${w}_$i 60 $B/tilecraft bench --op fused_moe --workload $w --warmup 2 --repeat 10 --scopes gate_up,down,experts --vs-kernels $KP/kernels
  grep -E "^    [a-z_@]+ +median" $OUT/vs_${w}_$i.log | grep experts | sed -E 's/ +\(.*//' | cut -c1-150
done; done
run ws_cpu_test 60 $B/tests/tilecraft_cpu_tests --gtest_filter='*LeanAKernelsCompileWithoutSpills*:*MmaTilesKeep*:*OnlyRouted*'
run race_tag 200 $B/tilecraft test --tag race --case-timeout 150
pack_logs
