# Session 40 (prepared by session 39; ~8 device-minutes): the full GPU
# suite on main, whose new parts have not run on a GPU: the wide-values
# smoke cases (gate values far below zero on every gated kernel), the
# decode-split key rules (grouped-GEMM keys keep T = 1 on the grouped-GEMM
# decode kernels: GpuRandomShapes.LayersOnMmaSync now reaches them with
# sm90=0), and the random GEMM draws with wide values. Run from the
# repository root on the GPU machine.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
GPU_JOBS=4 GPU_TIMEOUT=500 scripts/device_check.sh build gpu > $OUT/main.log 2>&1
grep -E "^== " $OUT/main.log
grep -E "Failed|\*\*\*|Timeout" $OUT/gpu_tests.log | head -20
cd $O && tar czf logs.tgz l
