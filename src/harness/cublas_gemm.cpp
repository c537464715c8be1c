// The compute ceiling: cuBLAS, loaded lazily like the driver so that tilecraft
// links no CUDA runtime library and starts on machines without one.
#include <cublas_api.h>
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

#include "tilecraft/harness/ceilings.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/timing.h"
#include "tilecraft/jit/compiler.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::harness {
namespace {
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  using GemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                    const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                    const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmFn gemm = nullptr;
  bool ok = false;
};

Cublas load_cublas(std::string& note) {
  Cublas c;
  void* lib = nullptr;
  for (std::string name : {std::string("libcublas.so.13"), jit::cuda_home() + "/lib64/libcublas.so.13",
                           std::string("libcublas.so")}) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
  }
  if (!lib) {
    note = "cuBLAS (libcublas.so.13) not found";
    return c;
  }
  c.create = reinterpret_cast<decltype(c.create)>(dlsym(lib, "cublasCreate_v2"));
  c.destroy = reinterpret_cast<decltype(c.destroy)>(dlsym(lib, "cublasDestroy_v2"));
  c.set_stream = reinterpret_cast<decltype(c.set_stream)>(dlsym(lib, "cublasSetStream_v2"));
  c.gemm = reinterpret_cast<decltype(c.gemm)>(dlsym(lib, "cublasGemmEx"));
  c.ok = c.create && c.destroy && c.set_stream && c.gemm;
  if (!c.ok) note = "cuBLAS lacks cublasGemmEx/cublasCreate_v2";
  return c;
}
}  // namespace

double cublas_gemm_tflops(int device, int n, std::string& note) {
  static Cublas cb = load_cublas(note);
  if (!cb.ok) return 0;
  rt::ensure_context(device);
  rt::Stream stream(device);
  DeviceTensor a(DType::kBF16, {n, n}, device), b(DType::kBF16, {n, n}, device), c(DType::kBF16, {n, n}, device);
  // Random data: a product of zeros runs measurably faster than real data.
  fill_uniform_device(a.view(), 1, 1, -1.f, 1.f, stream.get());
  fill_uniform_device(b.view(), 1, 2, -1.f, 1.f, stream.get());
  cublasHandle_t h = nullptr;
  if (cb.create(&h) != CUBLAS_STATUS_SUCCESS) {
    note = "cublasCreate failed";
    return 0;
  }
  cb.set_stream(h, reinterpret_cast<cudaStream_t>(stream.get()));
  const float alpha = 1.f, beta = 0.f;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  auto run = [&](CUstream) {
    st = cb.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.data(), CUDA_R_16BF, n, b.data(), CUDA_R_16BF, n,
                 &beta, c.data(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  TimingSettings s;
  s.warmup = 3;
  s.repeat = 10;
  s.hot = true;  // compute-bound: the flush does not matter
  TimingStats t = time_cuda(run, stream.get(), s, nullptr);
  cb.destroy(h);
  if (st != CUBLAS_STATUS_SUCCESS) {
    note = "cublasGemmEx failed with status " + std::to_string(int(st));
    return 0;
  }
  note = "cuBLAS bf16 GEMM " + std::to_string(n) + "^3, fp32 accumulate, random inputs, median of 10";
  return 2.0 * double(n) * n * n / (t.median * 1e-3) / 1e12;
}

bool cublas_gemm_rowmajor(int device, CUstream_st* stream, bool w_nk, int64_t m, int64_t n, int64_t k, DType dtype,
                          const void* a, const void* w, void* c, std::string& why) {
  static std::string load_note;
  static Cublas cb = load_cublas(load_note);
  if (!cb.ok) {
    why = load_note;
    return false;
  }
  // One handle per process and device, made on first use.
  static std::map<int, cublasHandle_t> handles;
  static std::mutex mu;
  cublasHandle_t h = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = handles.find(device);
    if (it == handles.end()) {
      rt::ensure_context(device);
      if (cb.create(&h) != CUBLAS_STATUS_SUCCESS) {
        why = "cublasCreate failed";
        return false;
      }
      handles[device] = h;
    } else {
      h = it->second;
    }
  }
  cb.set_stream(h, reinterpret_cast<cudaStream_t>(stream));
  // Row-major C = A W is column-major C^T = W' A^T with W' = W (as [k, n]
  // column-major, i.e. row-major [n, k], transposed) or W as stored.
  const cudaDataType t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t st =
      cb.gemm(h, w_nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, w, t,
              int(w_nk ? k : n), a, t, int(k), &beta, c, t, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    why = "cublasGemmEx failed with status " + std::to_string(int(st));
    return false;
  }
  return true;
}

}  // namespace tilecraft::harness
