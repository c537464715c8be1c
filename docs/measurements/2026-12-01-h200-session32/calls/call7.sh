# Session 32 call 7 (main + the bulk_cols key and the 1 MB bulk default, not
# committed yet): the GPU tests (PerRowSchedules now runs the bulk kernel
# with 1 and 3 columns per piece too), then piece widths at T=1: call 6 had
# the bulk gate/up win from 1.0 to 1.5 MB per SM but lose at H=5120 (1.9 MB,
# one 20 KB column per piece, 8 stages), two rounds each.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
GPU_JOBS=3 timeout 240 scripts/device_check.sh gpu >> $OUT/main.log 2>&1; grep -E "^== gpu" $OUT/main.log
grep -E "Failed|FAILED|\*\*\*" $OUT/gpu_tests.log | head -20
: > $OUT/cols.log
run() {  # shape, then configs
  local S=$1; shift
  for r in 1 2; do
    for c in "$@"; do
      echo "### $S round $r $c" >> $OUT/cols.log
      timeout 60 build-device/tilecraft bench --op fused_moe --shape "$S" --warmup 2 --repeat 30 --trials 1 \
        --scopes experts --config $c >> $OUT/cols.log 2>&1
    done
  done
}
Q="E=128,K=8,mode=softmax_topk,renormalize=true,dtype=bf16"
run "T=1,H=5120,I=1536,$Q" gate_up_bulk=0 gate_up_bulk=1 gate_up_bulk_cols=2 gate_up_bulk_cols=3
run "T=1,H=4096,I=1536,$Q" gate_up_bulk=0 gate_up_bulk=1 gate_up_bulk_cols=1 gate_up_bulk_cols=3 gate_up_bulk_cols=4
run "T=1,H=4096,I=14336,E=8,K=2,mode=softmax_topk,renormalize=true,dtype=bf16" gate_up_bulk=1 gate_up_bulk_cols=1 gate_up_bulk_cols=3
awk '/^###/{h=$2" "$5} /^\[/{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1)} /experts /{print h, "layer", m, "experts", $3} /rror/{print h, $0}' $OUT/cols.log | sed -E 's/,E=128,K=8,mode=softmax_topk,renormalize=true,dtype=bf16//'
cd $O && tar czf logs.tgz l
