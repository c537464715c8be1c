# Session 42, call 3 (prepared by session 41; ~3 device-minutes, after calls
# 1-2 while build-werror is there): Mixtral T=512 is the one model row whose
# kernel_only loses to the per-expert cuBLAS loop (1.04x; 128 +- 11 rows per
# expert on 128-row tiles, half the experts spilling a few rows into a second
# tile). Session 41 tried 64-row tiles, half_skip and down block_n=128 (all
# slower or tied); the CTA order and ring depth were not tried at this shape.
# Sides (configs checked with `tilecraft compile --config` on the CPU).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
[ -d $B ] || make build BUILD_DIR=$B > $OUT/make_build.log 2>&1
timeout 250 $B/tilecraft bench --op fused_moe --workload mixtral-8x7b-T512 --warmup 2 --repeat 10 --trials 1 \
  --vs-config group_m=1 --vs-config group_m=16 --vs-config gate_up_stages=3 --vs-config group_align=3 \
  > $OUT/mixtral512.log 2>&1; echo "rc=$?"
grep -hE "^\[|    (experts|kernel_only|cublas_per_expert|gate_up|down)(@vs[0-9]*)? +median|WRONG" $OUT/mixtral512.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
