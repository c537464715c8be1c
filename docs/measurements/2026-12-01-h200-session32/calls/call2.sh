# Prepared in session 31 for a later session (not yet run; on main). Why do
# CTA pairs (cluster=2) lose 10-30% on compute-bound gate/up projections
# (session 16: race 1 gate/up 16664 against 12681-12934 us; session 29:
# race 2 +21%) while cuBLAS runs every race GEMM on 2-CTA clusters? ncu of
# race 2's gate/up, one CTA per tile against pairs, pairs + multicast: SM
# active cycles (min/max: are both CTAs of a pair busy?), tensor pipe, L2
# and DRAM bytes, stall reasons. About 6 minutes.
#   run(command="bash docs/prepared/session32_pairs_ncu.sh")
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
export NCU_KERNELS=grouped_gemm_sm90_ws NCU_METRICS=sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg
NCU_TAG=one timeout 180 scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
NCU_TAG=pairs NCU_FLAGS="--config gate_up_cluster=2" timeout 180 scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
NCU_TAG=mc NCU_FLAGS="--config gate_up_cluster=2 --config gate_up_multicast=1" timeout 180 scripts/device_check.sh ncu:fused_moe:race-performance-2 >> $OUT/main.log 2>&1
grep -hE "grouped_gemm_sm90_ws_kernel<|Duration|SM Frequency|sm__cycles_active|Compute \(SM\)|L2 Cache Throughput|dram__bytes_read.sum |lts__t_sector_hit" $OUT/ncu_*.txt | cut -c1-140
cd $O && tar czf logs.tgz l
