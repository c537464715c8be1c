# Session 39 call 3: ours against CUTLASS's grouped GEMM (torch._grouped_mm)
# on the same tensors, calls alternating (same clock and power state), and
# each one's energy per call (NVML) back to back; both data kinds (torch's
# randn, our bench's uniform). Call 2's ncu had both at ~2.9 ms at ncu's
# locked 1.33 GHz, yet ours 15% slower under the power cap: is it energy?
# Then ncu DRAM / L2 bytes and instruction counts of both.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
ls $B/python/tilecraft/_C*.so || echo "NO EXTENSION"
export PYTHONPATH=$PWD/$B/python TILECRAFT_CACHE_DIR=/tmp/tilecraft_cache
for d in randn uniform; do
  timeout 150 python3 scripts/torch_grouped_mm_bench.py --data $d --tilecraft --energy-ms 1500 --repeat 10 \
    --shape 8,1024,28672,4096 --shape 8,1024,4096,14336 --shape 128,256,1536,2048 > $OUT/ab_$d.txt 2>&1
  echo "$d rc=$?"; cat $OUT/ab_$d.txt
done
timeout 150 ncu --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__inst_executed.sum \
  --kernel-name-base demangled --kernel-name "regex:device_kernel|grouped_gemm_sm90" --launch-count 3 \
  python3 scripts/torch_grouped_mm_bench.py --tilecraft --repeat 1 --shape 8,1024,28672,4096 > $OUT/ncu_bytes.txt 2>&1
echo "ncu rc=$?"
grep -E "^  [a-zA-Z_].*\(|Duration|SM Frequency|Compute \(SM\)|dram__|lts__t_bytes|sm__inst" $OUT/ncu_bytes.txt | cut -c1-110
cd $O && tar czf logs.tgz l
