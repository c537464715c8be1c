# Session 42, call 2 (prepared by session 41; ~5 device-minutes; right after
# call 1, while build-werror is still there): the main job and the race on
# the GPU after session 41's host changes (run now exits 1 when a kernel
# did not compile, a test failed or a timed output was wrong; 2 when a case
# was only refused), and the layer's
# tests at the shapes session 41's tile-height rule moved (64 rows per
# expert: 128-row tiles now).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
B=build-werror
[ -d $B ] || make build BUILD_DIR=$B > $OUT/make_build.log 2>&1
t0=$SECONDS; timeout 300 $B/tilecraft run --out $OUT/results > $OUT/run.log 2>&1
echo "run rc=$? in $((SECONDS - t0))s: $(grep -E 'passed, .* failed' $OUT/run.log | tail -1)"
(cd $OUT && tar czf results.tgz results && rm -rf results)
timeout 150 $B/tilecraft test --tag race > $OUT/race_test.log 2>&1; echo "race tests rc=$?: $(tail -1 $OUT/race_test.log)"
timeout 120 $B/tilecraft test --op fused_moe --workload mixtral-8x7b-T256 \
  --shape T=2048,H=7168,I=2048,E=256,K=8,dtype=bf16,routing=skewed \
  --shape T=1024,H=4096,I=1536,E=128,K=8,dtype=bf16,routing=empty_experts > $OUT/layer_test.log 2>&1
echo "layer tests rc=$?: $(tail -1 $OUT/layer_test.log)"
# The Python package with torch on the GPU (session 41 added argument checks
# to the wrappers the race drop-in calls).
TILECRAFT_CACHE_DIR=/tmp/tilecraft_cache timeout 200 scripts/python_tests.sh $B > $OUT/python_tests.log 2>&1
echo "python tests rc=$?: $(tail -1 $OUT/python_tests.log)"
timeout 200 $B/tilecraft bench --op fused_moe --workload mixtral-8x7b-T512 --warmup 2 --repeat 10 --trials 1 \
  --vs-config group_m=1 --vs-config group_m=16 --vs-config gate_up_stages=3 --vs-config group_align=3 \
  > $OUT/mixtral512.log 2>&1; echo "rc=$?"
grep -hE "^\[|    (experts|kernel_only|cublas_per_expert|gate_up|down)(@vs[0-9]*)? +median|WRONG" $OUT/mixtral512.log | sed -E 's/ +\(.*//' | cut -c1-150
cd $O && tar czf logs.tgz l
