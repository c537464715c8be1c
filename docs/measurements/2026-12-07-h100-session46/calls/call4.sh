# Call 4 (a fresh H100, tree 6fffab2: the fused combine's reworded refusal,
# sync_lint): the fused-combine and CLI tests, more random layers and
# grouped GEMMs with random configs.
export O=$OUT; mkdir -p $O/l; B=build-werror
t0=$SECONDS; make build BUILD_DIR=$B > $O/l/make_build.log 2>&1; echo "build rc=$? in $((SECONDS-t0))s; warnings: $(grep -c 'warning:' $O/l/make_build.log)"
t0=$SECONDS; timeout 90 ctest --test-dir $B -R "FusedCombine|^Cli\." -j 4 --output-on-failure > $O/l/ctest.log 2>&1; echo "ctest rc=$? in $((SECONDS-t0))s: $(grep -E 'tests passed|tests failed' $O/l/ctest.log)"
for s in 19 20 21; do t0=$SECONDS; timeout 45 $B/tilecraft test --op fused_moe --random 40 --random-config --seed $s --case-timeout 30 > $O/l/fuzz_layer_$s.log 2>&1; echo "layer seed $s rc=$? in $((SECONDS-t0))s: $(tail -1 $O/l/fuzz_layer_$s.log)"; done
t0=$SECONDS; timeout 45 $B/tilecraft test --op moe_grouped_gemm --random 12 --random-config --seed 18 --case-timeout 30 > $O/l/fuzz_gemm_18.log 2>&1; echo "gemm seed 18 rc=$? in $((SECONDS-t0))s: $(tail -1 $O/l/fuzz_gemm_18.log)"
