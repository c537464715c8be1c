# Session 42, call 5 (the session's last ~6 device-minutes):
# - the CLI tests on the GPU after this session's host changes (--config
#   values resolved on the CPU backend; the gate's settings read strictly);
# - where the mapping's time goes at 32768 slots (Qwen3-30B T=4096: the
#   stage takes ~14 us; two launches, count then scatter) and in the one-
#   launch gate + mapping at DeepSeek-V3 T=256 (15.1 us in call 4): ncu
#   durations per kernel (serialised: no dependent-launch overlap).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
t0=$SECONDS
(cd $B && timeout 170 ctest -R "^Cli\." -j 4 --output-on-failure > $OUT/cli_tests.log 2>&1; echo "cli tests rc=$? in $((SECONDS - t0))s")
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $OUT/cli_tests.log | head -10
N="--clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy"
timeout 60 ncu $N -k "regex:mapping_(count|scatter)" --launch-count 4 \
  $B/tilecraft bench --op fused_moe --workload qwen3-30b-a3b-T4096 --scopes mapping --warmup 0 --repeat 1 --trials 1 > $OUT/ncu_mapping_qwen3_T4096.txt 2>&1
echo "ncu mapping rc=$?"
timeout 60 ncu $N -k "regex:topk_gate_mapping" --launch-count 2 \
  $B/tilecraft bench --op fused_moe --workload deepseek-v3-router-T256 --scopes gate_mapping --warmup 0 --repeat 1 --trials 1 > $OUT/ncu_gate_mapping_dsv3_T256.txt 2>&1
echo "ncu gate_mapping rc=$?"
grep -hE "^  [a-z_]+.*\(|Duration|DRAM Throughput|Grid Size|Block Size|Registers Per" $OUT/ncu_*.txt | head -40
cd $O && tar czf logs.tgz l
