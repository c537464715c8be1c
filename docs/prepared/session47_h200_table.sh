# Prepared by session 46: issue 3's table on an H200 for today's tree (the
# last one is session 41's; since then only host code and the opt-in fused
# combine changed, so the rows should match it within the board's spread).
# Every race and model row of fused_moe, ceilings in the same run; the
# table by session 41's table.py.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s"
G="--warmup 2 --repeat 10 --trials 1"
timeout 110 $B/tilecraft bench --op fused_moe --tag race $G > $OUT/race.log 2>&1; echo "race rc=$?"
timeout $((560 - SECONDS)) $B/tilecraft bench --op fused_moe --tag model $G > $OUT/model.log 2>&1; echo "model rc=$?"
python3 docs/measurements/2026-12-02-h200-session41/calls/table.py $OUT/race.log $OUT/model.log > $OUT/table.md 2>&1; cat $OUT/table.md
cd $O && tar czf logs.tgz l
