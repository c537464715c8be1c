# Times cuTensorMapEncodeTiled on this machine's driver (host cost of one TMA map).
import ctypes, time, torch
cu = ctypes.CDLL("libcuda.so.1")
x = torch.empty(7168 * 2048, dtype=torch.float16, device="cuda")
extra = [torch.empty(1 << 24, dtype=torch.float16, device="cuda") for _ in range(200)]  # many allocations
m = (ctypes.c_uint64 * 16)()
U64, U32 = ctypes.c_uint64, ctypes.c_uint32
dims = (U64 * 3)(2048, 7168, 1); strides = (U64 * 2)(4096, 7168 * 4096); box = (U32 * 3)(64, 64, 1); es = (U32 * 3)(1, 1, 1)
f = cu.cuTensorMapEncodeTiled
def enc(p):
    return f(ctypes.byref(m), 6, 3, ctypes.c_void_p(p), dims, strides, box, es, 0, 3, 2, 0)
print("rc", enc(x.data_ptr()))
for n in (10, 1000):
    t = time.perf_counter()
    for i in range(n): enc(x.data_ptr())
    print(f"{n} encodes: {(time.perf_counter() - t) / n * 1e6:.2f} us each")
ptrs = [e.data_ptr() for e in extra]
t = time.perf_counter()
for p in ptrs: enc(p)
print(f"{len(ptrs)} distinct pointers: {(time.perf_counter() - t) / len(ptrs) * 1e6:.2f} us each")
