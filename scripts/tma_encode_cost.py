#!/usr/bin/env python3
"""Host cost of one cuTensorMapEncodeTiled call on this machine's driver.

moe_grouped_gemm encodes one TMA map per expert matrix when weights come per
expert; this says what that costs. Needs a CUDA GPU and torch (for memory).
Usage: python3 scripts/tma_encode_cost.py
"""
import ctypes
import time

import torch

FLOAT16, INTERLEAVE_NONE, SWIZZLE_128B, L2_PROMOTION_128B, OOB_FILL_NONE = 6, 0, 3, 2, 0

cu = ctypes.CDLL("libcuda.so.1")
U64, U32 = ctypes.c_uint64, ctypes.c_uint32
x = torch.empty(7168 * 2048, dtype=torch.float16, device="cuda")  # one race-sized [K, N] expert matrix
many = [torch.empty(1 << 24, dtype=torch.float16, device="cuda") for _ in range(200)]  # many live allocations
tmap = (ctypes.c_uint64 * 16)()
dims, strides = (U64 * 3)(2048, 7168, 1), (U64 * 2)(2048 * 2, 7168 * 2048 * 2)
box, elem = (U32 * 3)(64, 64, 1), (U32 * 3)(1, 1, 1)


def encode(ptr):
    return cu.cuTensorMapEncodeTiled(ctypes.byref(tmap), FLOAT16, 3, ctypes.c_void_p(ptr), dims, strides, box, elem,
                                     INTERLEAVE_NONE, SWIZZLE_128B, L2_PROMOTION_128B, OOB_FILL_NONE)


print("rc", encode(x.data_ptr()))
for n in (10, 1000):
    t = time.perf_counter()
    for _ in range(n):
        encode(x.data_ptr())
    print(f"{n} encodes: {(time.perf_counter() - t) / n * 1e6:.2f} us each")
t = time.perf_counter()
for m in many:
    encode(m.data_ptr())
print(f"{len(many)} distinct pointers: {(time.perf_counter() - t) / len(many) * 1e6:.2f} us each")
