#!/usr/bin/env bash
# Writes the PTX of selected kernels (compiled by NVRTC for sm_90a; no GPU
# needed) into DIR, one file per case, with NVRTC's per-compile internal names
# normalised. Two snapshots that `diff -r` finds equal prove that a refactor
# changed no kernel code, which is how kernels verified on the H200 stay
# verified when this machine has no GPU.
#   usage: scripts/ptx_snapshot.sh DIR [OP:WORKLOAD:VARIANT[:CONFIG] ...]
#   default cases: the grouped GEMM's kernels (mma.sync and wgmma)
set -euo pipefail
dir=${1:?usage: scripts/ptx_snapshot.sh DIR [OP:WORKLOAD:VARIANT[:CONFIG] ...]}
shift
bin=${TILECRAFT_BIN:-build/tilecraft}
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  cases=(moe_grouped_gemm:race-case1-gateup:SiluUp moe_grouped_gemm:race-case1-down:Plain
         moe_grouped_gemm:deepseek-v3-t4096-down:RowScaleF32 moe_grouped_gemm:deepseek-v3-t16-gateup:SiluUp
         moe_grouped_gemm:prefill-nk:Plain moe_grouped_gemm:prefill-kn-tails:Plain:sm90=0
         moe_grouped_gemm:odd-shapes:Plain moe_grouped_gemm:kn-stacked:RowScaleF32:sm90=1)
fi
mkdir -p "$dir"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
for c in "${cases[@]}"; do
  IFS=: read -r op w v cfg <<< "$c"
  out="$dir/${op}_${w}_${v}${cfg:+_$cfg}.ptx"
  TILECRAFT_CACHE_DIR=$cache "$bin" inspect --op "$op" --workload "$w" --variant "$v" ${cfg:+--config $cfg} \
    --dump ptx --arch sm_90a | sed -E 's/_INTERNAL_[A-Za-z0-9_]*tc3moe/_INTERNAL_X_tc3moe/g' > "$out"
  echo "$out: $(wc -l < "$out") lines"
done
