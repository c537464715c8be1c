# Session 54: TMA weight maps in global memory for more than 64 experts by
# pointer (tma_map_table.cpp, moe/tma_maps.cuh). Any GPU; ~8 min;
# DEADLINE=N cuts it; STEPS picks steps (default: all but mid, which
# is the mid-T part of bench alone, and smem, which applies
# session54_tma_maps_smem.patch to the tree and tests again: run it last).
. scripts/device_steps.sh
build_tree
S=${STEPS:-"tests layer sanitize bench suite"}
PE="T=4096,H=2048,I=768,E=128,K=8,dtype=bf16,weights=per_expert"
ST="T=4096,H=2048,I=768,E=128,K=8,dtype=bf16,weights=stacked"
has() { case " $S " in *" $1 "*) return 0 ;; esac; return 1; }
if has tests; then
  run gtests 150 ctest --test-dir $B -R "GlobalTensorMaps|PerExpertPointersPastTheParams|GlobalTensorMapKernels" --output-on-failure
  grep -E "Passed|Failed|Failure|Expected|Which is" $OUT/gtests.log | head -30
fi
if has layer; then
  run layer 120 $B/tilecraft test --op fused_moe --shape "$PE" --shape "T=300,H=1024,I=512,E=96,K=6,dtype=fp16,weights=per_expert" \
      --shape "T=512,H=1024,I=256,E=256,K=8,dtype=bf16,weights=per_expert" --shape "T=2000,H=520,I=264,E=72,K=4,dtype=fp16,weights=per_expert"
  run random 90 $B/tilecraft test --op fused_moe --random 30 --seed 54 --case-timeout 30
  run gemm_smoke 60 $B/tilecraft test --op moe_grouped_gemm --tag smoke
fi
if has sanitize; then
  run memcheck 60 $CS $B/tilecraft test --op moe_grouped_gemm --workload many-experts-per-expert-ws
  run memcheck_layer 60 $CS $B/tilecraft test --op fused_moe --shape "T=512,H=1024,I=256,E=256,K=8,dtype=bf16,weights=per_expert"
fi
if has bench || has mid; then
  has bench && run bench_pe 90 $B/tilecraft bench --op fused_moe --shape "$PE" --warmup 2 --repeat 10 --scopes gate_up,down,experts --vs-config tma=0
  has bench && run bench_st 60 $B/tilecraft bench --op fused_moe --shape "$ST" --warmup 2 --repeat 10 --scopes gate_up,down,experts
  # Mid T (alone: STEPS=mid), where the maps' kernel before each GEMM weighs most: by pointer against stacked.
  for t in 256 64; do
    run bench_pe$t 60 $B/tilecraft bench --op fused_moe --shape "${PE/T=4096/T=$t}" --warmup 2 --repeat 20 --scopes gate_up,down,experts --vs-config tma=0
    run bench_st$t 60 $B/tilecraft bench --op fused_moe --shape "${ST/T=4096/T=$t}" --warmup 2 --repeat 20 --scopes gate_up,down,experts
  done
  for f in bench_pe bench_st bench_pe256 bench_st256 bench_pe64 bench_st64; do echo "$f:"; grep -E "^    [a-z_@]+ +median" $OUT/$f.log | sed -E 's/ +\(.*//' | cut -c1-150; done
fi
if has smem; then  # the maps finished in shared memory: applied to this copy of the tree, then the tests again
  patch -p1 --forward --batch < docs/prepared/session54_tma_maps_smem.patch && echo "smem patch applied" && build_tree
  run gtests_smem 150 ctest --test-dir $B -R "GlobalTensorMaps|PerExpertPointersPastTheParams|GlobalTensorMapKernels" --output-on-failure
  run layer_smem 90 $B/tilecraft test --op fused_moe --shape "$PE" --shape "T=512,H=1024,I=256,E=256,K=8,dtype=bf16,weights=per_expert"
fi
if has suite; then
  run gpu_suite 240 ctest --test-dir $B -L gpu -j 6
  grep -E "tests passed|Failed|\*\*\*" $OUT/gpu_suite.log | head -20
fi
pack_logs
