#!/usr/bin/env bash
# Diagnoses a crash of the Python extension on the GPU machine: which library
# load breaks, and a native backtrace (LD_PRELOAD'ed handler). Logs in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/tilecraft_out}; B=${B:-build-device}
export PYTHONPATH=$PWD/$B/python
cat > /tmp/bt.c <<'C'
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>
static void h(int s) { void* f[64]; int n = backtrace(f, 64); backtrace_symbols_fd(f, n, 2); signal(s, SIG_DFL); raise(s); }
__attribute__((constructor)) static void init(void) { signal(SIGSEGV, h); signal(SIGABRT, h); }
C
gcc -shared -fPIC -o /tmp/libbt.so /tmp/bt.c
venv=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))")/../nvidia/cu13/lib
sys_nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || ls /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13)
{
echo "== system nvrtc then torch"; python3 -c "import ctypes; ctypes.CDLL('$sys_nvrtc'); import torch; print('ok')" 2>&1 | tail -2
echo "== libfmt+yaml then torch"; python3 -c "import ctypes; ctypes.CDLL('libfmt.so.9'); ctypes.CDLL('libyaml-cpp.so.0.8'); import torch; print('ok')" 2>&1 | tail -2
echo "== tilecraft then torch (backtrace)"; LD_PRELOAD=/tmp/libbt.so python3 -c "import tilecraft; import torch; print('ok')" 2>&1 | head -30
echo "== torch then tilecraft op (backtrace)"; LD_PRELOAD=/tmp/libbt.so python3 -c "
import torch, tilecraft
x = torch.randn(64, 512).to(torch.bfloat16).cuda()
pos = torch.randperm(64)[:48].reshape(16, 3).to(torch.int32).cuda()
print('reduce', tilecraft.moe_reduce_fused(x, pos).float().sum().item())" 2>&1 | head -30
echo "== nvrtc versions"; ls -la $venv/libnvrtc* $sys_nvrtc* 2>&1
} > "$OUT/debug.log" 2>&1
cat "$OUT/debug.log"
