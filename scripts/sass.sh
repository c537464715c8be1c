#!/usr/bin/env bash
# SASS of JIT-cached kernels, on any machine (no GPU needed):
#   scripts/sass.sh CUBIN [nvdisasm options]   e.g. -c (code only)
# The cubins lie in the JIT cache (TILECRAFT_CACHE_DIR, default
# ~/.cache/tilecraft) beside a JSON record naming each kernel and config.
# Uses nvdisasm from PATH; where the CUDA toolkit lacks it (the CPU
# machines), installs NVIDIA's nvdisasm wheel once into .tools/ of the
# repository (pip, no other dependency).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if command -v nvdisasm > /dev/null; then
  tool=nvdisasm
else
  tool=$(ls "$root"/.tools/nvdisasm/nvidia/*/bin/nvdisasm 2>/dev/null | head -1 || true)
  if [ -z "$tool" ]; then
    mkdir -p "$root/.tools"
    python3 -m pip install --quiet --no-deps --target "$root/.tools/nvdisasm" nvidia-cuda-nvdisasm >&2
    tool=$(ls "$root"/.tools/nvdisasm/nvidia/*/bin/nvdisasm | head -1)
    chmod +x "$tool"
  fi
fi
[ $# -ge 1 ] || { echo "usage: scripts/sass.sh CUBIN [nvdisasm options]" >&2; exit 2; }
cubin=$1; shift
exec "$tool" "$@" "$cubin"
