# Session 53: ws_cp_async_register_split.patch, the warp-specialised GEMM's
# register split where the producer copies weights by cp.async (tma=0: the
# default for more than 64 experts given by pointer, or --config tma=0).
# At main's 56 / 224 those kernels spill 24-156 bytes (ptxas, sm_90a); the
# patch gives the producer 72 (gated) or 88 (plain) and compiles them
# spill-free. Any GPU; ~4 min; DEADLINE=N cuts it. If it passes and ties or
# wins: `git apply docs/prepared/ws_cp_async_register_split.patch` (kernel
# and its CPU test) from the repository root and delete the patch.
. scripts/device_steps.sh
build_tree
patched_kernels ws_split docs/prepared/ws_cp_async_register_split.patch  # must say "applied: 1 file(s) differ"
KO="--options release,kernels=$KP/kernels"
PE="T=4096,H=2048,I=768,E=128,K=8,dtype=bf16,weights=per_expert"
run ws_layer 90 $B/tilecraft test --op fused_moe --shape "$PE" --shape "T=300,H=1024,I=512,E=96,K=6,dtype=fp16,weights=per_expert" \
    --shape "T=2000,H=520,I=264,E=72,K=4,dtype=bf16,weights=stacked,config=tma=0" $KO
run ws_race 90 $B/tilecraft test --op fused_moe --workload race-functional-2 --config tma=0 $KO
run ws_random 90 $B/tilecraft test --op fused_moe --random 30 --seed 53 --case-timeout 30 $KO
run ws_gemm 60 $B/tilecraft test --op moe_grouped_gemm --tag smoke $KO
run ws_compile 60 $B/tilecraft compile --op fused_moe --shape "$PE" --workload race-functional-2 --config tma=0 $KO
grep -h "wgmma-ws" $OUT/ws_compile.log | cut -c1-170
run ws_vs_pe 90 $B/tilecraft bench --op fused_moe --shape "$PE" --warmup 2 --repeat 10 --scopes gate_up,down,experts --vs-kernels $KP/kernels
run ws_vs_race2 90 $B/tilecraft bench --op fused_moe --workload race-performance-2 --config tma=0 --warmup 2 --repeat 10 --scopes gate_up,down,experts --vs-kernels $KP/kernels
for f in ws_vs_pe ws_vs_race2; do grep -E "^    [a-z_@]+ +median" $OUT/$f.log | sed -E 's/ +\(.*//' | cut -c1-150; done
pack_logs
