#!/usr/bin/env bash
# Same-run A/B of kernel code: the binary embeds the working tree's kernel
# headers; TILECRAFT_KERNEL_DIR swaps in another revision's, so one device
# call times both on one machine (machines differ by 3-5%; see
# docs/perf/fused_moe.md).
#   here:      scripts/kernel_ab.sh REV        writes .ab_kernels/ (kernels/ of REV; git-ignored)
#   device:    run(..., carry=[".ab_kernels"]) then
#              scripts/device_check.sh build ab:fused_moe:qwen3-30b-a3b-T1 ...
#              (AB_ROUNDS rounds of new then old; BENCH_FLAGS as for bench steps)
set -euo pipefail
rev=${1:?usage: scripts/kernel_ab.sh REV}
cd "$(git rev-parse --show-toplevel)"
git rev-parse --verify --quiet "$rev^{commit}" > /dev/null || { echo "kernel_ab: '$rev' is not a commit" >&2; exit 2; }
rm -rf .ab_kernels
mkdir -p .ab_kernels
git archive "$rev" kernels | tar -x -C .ab_kernels --strip-components=1
git rev-parse "$rev" > .ab_kernels/REVISION
echo "kernel_ab: .ab_kernels holds kernels/ of $(cat .ab_kernels/REVISION) ($(find .ab_kernels -name '*.cuh' | wc -l) headers)"
