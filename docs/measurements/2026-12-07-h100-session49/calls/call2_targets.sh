# Prepared by session 48: issue 3's target rows only on an H200 (the full
# table, session47_h200_table.sh, takes ~9 min; this one a few), each
# workload its own process with its ceilings; the table by session 41's
# table.py over all the logs. DEADLINE=N (default 560) stops starting rows.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
D=${DEADLINE:-560}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t0=$SECONDS
if [ -d $B ]; then cmake --build $B -j16 > $OUT/make_build.log 2>&1; else make build BUILD_DIR=$B > $OUT/make_build.log 2>&1; fi
echo "build rc=$? in $((SECONDS - t0))s"
G="--warmup 2 --repeat 10 --trials 1"
for w in race-performance-1 race-performance-2 deepseek-v3-T1 deepseek-v3-T16 deepseek-v3-T512 deepseek-v3-T4096 \
         qwen3-30b-a3b-T1 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096 mixtral-8x7b-T512 deepseek-v3-T256; do
  left=$((D - SECONDS)); [ $left -lt 30 ] && { echo "$w: skipped (no time left)"; continue; }
  t1=$SECONDS
  timeout $((left < 90 ? left : 90)) $B/tilecraft bench --op fused_moe --workload $w $G > $OUT/$w.log 2>&1
  echo "$w rc=$? in $((SECONDS - t1))s"
done
python3 docs/measurements/2026-12-02-h200-session41/calls/table.py $(ls $OUT/race-*.log $OUT/deepseek-*.log $OUT/qwen3-*.log $OUT/mixtral-*.log 2>/dev/null) > $OUT/table.md 2>&1
cat $OUT/table.md
grep -h "gate_mapping\|stage" $OUT/deepseek-v3-T256.log 2>/dev/null | head -8
cd $O && tar czf logs.tgz l
