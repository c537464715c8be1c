# Session 39 call 2: where our grouped GEMM loses to CUTLASS's (torch
# _grouped_mm: 128x256x64 cooperative, 2x1 clusters multicasting the weights,
# 794 TFLOP/s on Mixtral gate/up shapes in call 1 against our 685). Ours on
# torch's exact problem (contiguous A, plain store, stacked [E,N,K]) and
# gathered; Mixtral's down shape on both; ours with CTA pairs (+ multicast)
# in one process; ncu (speed of light, pipes, warp states, memory) of both.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
G="--warmup 2 --repeat 10 --trials 1"
S=T=4096,topk=2,E=8,dtype=bf16
for s in "N=28672,K=4096,a_rows=contiguous" "N=28672,K=4096" "N=4096,K=14336,a_rows=contiguous"; do
  timeout 90 $B/tilecraft bench --op moe_grouped_gemm --variant Plain --shape "$S,$s" $G \
    --vs-config cluster=2 cluster=2,multicast=1 > $OUT/gemm_$s.log 2>&1; echo "$s rc=$?"
  grep -E "^    [a-z_]+(@vs[0-9]*)? |ceilings|WRONG" $OUT/gemm_$s.log | cut -c1-150
done
timeout 90 python3 scripts/torch_grouped_mm_bench.py --shape 8,1024,28672,4096 --shape 8,1024,4096,14336 \
  > $OUT/torch.txt 2>&1; echo "torch rc=$?"; cat $OUT/torch.txt
timeout 90 $B/tilecraft bench --op fused_moe --workload mixtral-8x7b-T4096 $G --scopes gate_up,down \
  --vs-config gate_up_cluster=2,gate_up_multicast=1 > $OUT/layer_pairs.log 2>&1; echo "layer pairs rc=$?"
grep -E "^    (gate_up|down)|WRONG" $OUT/layer_pairs.log | cut -c1-150
SEC="--section SpeedOfLight --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis"
timeout 120 ncu $SEC --kernel-name-base demangled --kernel-name "regex:device_kernel" --launch-count 1 \
  python3 scripts/torch_grouped_mm_bench.py --shape 8,1024,28672,4096 --repeat 1 > $OUT/ncu_torch.txt 2>&1
echo "ncu torch rc=$?"
timeout 120 ncu $SEC --kernel-name-base demangled --kernel-name "regex:grouped_gemm_sm90_ws_kernel" --launch-count 1 \
  $B/tilecraft bench --op moe_grouped_gemm --variant Plain --shape "$S,N=28672,K=4096,a_rows=contiguous" \
  --warmup 0 --repeat 1 --trials 1 > $OUT/ncu_ours.txt 2>&1; echo "ncu ours rc=$?"
for f in ncu_torch ncu_ours; do echo "== $f"; grep -E "^  [a-zA-Z_].*\(|Throughput|Duration|SM Frequency|Registers|Block Size|Grid Size|Cluster Size|Executed Ipc|Issue Slots|Pipe|Warp Cycles|Achieved|Stall|Shared Memory Config" $OUT/$f.txt | cut -c1-200 | head -45; done
cd $O && tar czf logs.tgz l
