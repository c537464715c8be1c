# Session 34 call 4 (main): the model workloads' full test (session 33 left
# `tilecraft test --tag model` un-run after its GEMM change), then race 2 in
# six separate bench processes (experts, kernel_only and the cuBLAS loop in
# each): calls 1-3 saw the same kernels at 2.1 or 2.4-2.5 ms by how long the
# power cap held the clock back; this is that spread, with the loop's.
grep -q "STAGGER" kernels/moe/grouped_gemm_sm90_ws.cuh && { echo "not main"; exit 2; }
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
t0=$SECONDS; timeout 330 $B/tilecraft test --op fused_moe --tag model > $OUT/test_model.log 2>&1
echo "test --tag model: rc=$? in $((SECONDS - t0))s"; tail -3 $OUT/test_model.log
for i in 1 2 3 4 5 6; do
  timeout 60 $B/tilecraft bench --op fused_moe --workload race-performance-2 --warmup 2 --repeat 10 --trials 1 \
    --scopes experts,kernel_only,cublas_per_expert > $OUT/race2_run$i.log 2>&1
  echo "run $i: $(grep -E 'GPU over' $OUT/race2_run$i.log | grep -oE 'held back [0-9.]+ ms by power' | head -1)"
  grep -E "^    (experts|kernel_only|cublas_per_expert) " $OUT/race2_run$i.log | sed -E 's/ +\(.*//'
done
cd $O && tar czf logs.tgz l
