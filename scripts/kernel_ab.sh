#!/usr/bin/env bash
# Same-run A/B of kernel code: the binary embeds the working tree's kernel
# headers; TILECRAFT_KERNEL_DIR swaps in another revision's, so one device
# call times every variant on one machine (machines differ by 3-5%; see
# docs/perf/fused_moe.md).
#   here:      scripts/kernel_ab.sh REV [REV...]   writes .ab_kernels/<short rev>/ (kernels/ of each REV;
#                                                  git-ignored), replacing what was there
#   one process (preferred at a power cap: both sides share each round's clock):
#              tilecraft bench --op fused_moe --workload W --vs-kernels .ab_kernels/<short rev>
#   device:    run(..., carry=[".ab_kernels"]) then
#              scripts/device_check.sh build ab:fused_moe:qwen3-30b-a3b-T1 ...
#              (AB_ROUNDS rounds of this tree then each REV in order; BENCH_FLAGS as for bench steps)
# A variant that is not a commit yet: commit it on a scratch branch and name that.
# Only kernel code: a revision whose parameter headers (*_params.cuh) differ
# from the working tree's is skipped on the device (the binary would pass it
# structs of another layout; session 27 saw illegal instructions so), and
# such a change is compared by a config key in one tree (abcfg) instead.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/kernel_ab.sh REV [REV...]" >&2; exit 2; }
cd "$(git rev-parse --show-toplevel)"
for rev in "$@"; do
  git rev-parse --verify --quiet "$rev^{commit}" > /dev/null || { echo "kernel_ab: '$rev' is not a commit" >&2; exit 2; }
done
rm -rf .ab_kernels
for rev in "$@"; do
  full=$(git rev-parse "$rev^{commit}")
  d=.ab_kernels/$(git rev-parse --short=10 "$full")
  mkdir -p "$d"
  git archive "$full" kernels | tar -x -C "$d" --strip-components=1
  echo "$full" > "$d/REVISION"
  echo "$rev" > "$d/NAME"  # as given: abgpu skips diag/* (wrong results by design)
  echo "kernel_ab: $d holds kernels/ of $rev ($(find "$d" -name '*.cuh' | wc -l) headers)"
  # The device's ab step skips a revision whose parameter structs differ
  # from the working tree's (the binary fills this tree's); say so now.
  for f in $(cd kernels && find . -name '*_params.cuh' | sort); do
    cmp -s "kernels/$f" "$d/$f" || echo "kernel_ab: warning: ${f#./} differs from the working tree's: the ab step will skip $rev" >&2
  done
done
