# Session 41, call 2: Mixtral T=512 is the one model row where kernel_only
# loses to the per-expert cuBLAS loop (call 1: 928 against 889 us, 1.04x).
# ~128 rows per expert on 128-row tiles: half the experts spill a few rows
# into a second tile. Sides in one process: 64-row tiles, half_skip (empty
# 64-row halves skip their MMAs), the down projection at block_n=128.
# Mixtral T=256 (64 rows per expert, 64-row tiles) against 128-row tiles.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror; G="--warmup 2 --repeat 10 --trials 1"
if [ -d $B ]; then cmake --build $B -j16; else make build BUILD_DIR=$B; fi > $OUT/build.log 2>&1; echo "build rc=$?"
timeout 200 $B/tilecraft bench --op fused_moe --workload mixtral-8x7b-T512 $G \
  --vs-config block_m=64 --vs-config half_skip=1 --vs-config down_block_n=128 > $OUT/mixtral512.log 2>&1; echo "T512 rc=$?"
timeout 120 $B/tilecraft bench --op fused_moe --workload mixtral-8x7b-T256 $G \
  --vs-config block_m=128 --vs-config half_skip=1 > $OUT/mixtral256.log 2>&1; echo "T256 rc=$?"
grep -hE "^\[|^ *vs[0-9]*:|    (experts|kernel_only|cublas_per_expert|gate_up|down)(@vs[0-9]*)? +median|WRONG" $OUT/mixtral*.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
