# The tree's shared-tile kernels against 798f40f's (= stop 27's): the same SASS
# for 8 instantiations, mangled names and spacing aside. Needs nvcc, nvdisasm
# and 798f40f's kernels at /tmp/ka/kernels (git archive 798f40f kernels).
# Argument: extra template arguments for the tree's side (", false" for the
# ping-pong tree of call 5, whose kernel took a PP parameter).
import subprocess, re, sys
cfgs = ["tc::bf16, tc::bf16, 128, 128, 4, 0, true, 0, true, false, true, 2",
        "tc::bf16, tc::bf16, 128, 256, 4, 0, false, 0, true, true, true, 1",
        "tc::bf16, tc::bf16, 128, 128, 4, 0, true, 0, true, false, true, 1",
        "tc::fp16, tc::fp16, 128, 128, 4, 1, true, 8, true, false, true, 1",
        "tc::fp16, tc::fp16, 128, 256, 4, 1, false, 8, true, true, true, 1",
        "tc::bf16, float, 128, 256, 4, 0, false, 0, true, true, true, 1",
        "tc::bf16, tc::bf16, 64, 128, 6, 0, true, 0, true, false, true, 1",
        "tc::bf16, tc::bf16, 128, 256, 4, 0, false, 0, false, false, false, 1"]
def sass(inc, args, tag):
    open(f'{tag}.cu','w').write(f'#include "moe/grouped_gemm_sm90_ws.cuh"\nvoid* f() {{ return (void*)&tc::moe::grouped_gemm_sm90_ws_kernel<{args}>; }}\n')
    subprocess.run(['nvcc','-std=c++17','-arch=sm_90a','-I'+inc,'-cubin',f'{tag}.cu','-o',f'{tag}.cubin'],check=True,capture_output=True)
    out = subprocess.run(['/tmp/nvd/nvidia/cu13/bin/nvdisasm','-hex' if False else '-c', f'{tag}.cubin'],capture_output=True,text=True).stdout
    lines = [re.sub(r'\s+',' ',re.sub(r'_ZN\w+','NAME',re.sub(r'/\*[0-9a-f]{4,}\*/','',l))).strip() for l in out.splitlines() if '/*' in l and not l.strip().startswith('//')]
    return lines
bad = 0
for i,c in enumerate(cfgs):
    a = sass('/tmp/ka/kernels', c, f'old{i}')
    b = sass('/work/main/kernels', c + (sys.argv[1] if len(sys.argv) > 1 else ''), f'new{i}')
    same = a == b
    bad += not same
    print(('SAME ' if same else 'DIFF ') + c, len(a), len(b))
sys.exit(1 if bad else 0)
