# Call 3 (same warm machine): more random layers with random configs (the
# fused combine among them) and random grouped GEMMs.
export O=$OUT; mkdir -p $O/l; B=build-werror
for s in 17 18; do t0=$SECONDS; timeout 80 $B/tilecraft test --op fused_moe --random 50 --random-config --seed $s --case-timeout 40 > $O/l/fuzz_layer_$s.log 2>&1; echo "layer seed $s rc=$? in $((SECONDS-t0))s: $(tail -1 $O/l/fuzz_layer_$s.log)"; done
t0=$SECONDS; timeout 80 $B/tilecraft test --op moe_grouped_gemm --random 60 --random-config --seed 17 --case-timeout 40 > $O/l/fuzz_gemm_17.log 2>&1; echo "gemm seed 17 rc=$? in $((SECONDS-t0))s: $(tail -1 $O/l/fuzz_gemm_17.log)"
grep -c "fused_combine=1" $O/l/fuzz_layer_1*.log
