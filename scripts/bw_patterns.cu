// Read bandwidth of the access patterns a decode GEMV can use, against the
// harness's grid-stride sweep (the read ceiling). A diagnostic, not part of
// the library: it asks whether the decode kernels' loss to the ceiling is the
// pattern (how many weight rows a warp streams at once, how long its
// contiguous runs are) or the schedule.
//   nvcc -O3 -arch=sm_90a -o bw_patterns scripts/bw_patterns.cu && ./bw_patterns
// Each warp owns a contiguous block of rows (the GEMV's output columns) and
// walks it ROWS rows at a time; per batch a lane issues ROWS x RUN 16-byte
// loads: RUN consecutive 512-byte warp chunks of each of ROWS rows.
#include <algorithm>
#include <vector>

#include "bw_common.cuh"

__global__ void sweep(const uint4* src, size_t n, unsigned* sink) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = ld_stream(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

// rows x row_chunks (16-byte chunks per row).
template <int ROWS, int RUN>
__global__ void __launch_bounds__(256, 2) rows_kernel(const uint4* src, int rows, int row_chunks, unsigned* sink) {
  const int warps = gridDim.x * 8, w = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = int((long long)rows * w / warps), r1 = int((long long)rows * (w + 1) / warps);
  unsigned acc = 0;
  for (int r = r0; r < r1; r += ROWS) {
    for (int q = lane; q < row_chunks; q += 32 * RUN) {
      uint4 v[ROWS][RUN];
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int u = 0; u < RUN; ++u)
          v[i][u] = r + i < r1 && q + 32 * u < row_chunks ? ld_stream(src + size_t(r + i) * row_chunks + q + 32 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int u = 0; u < RUN; ++u) acc ^= v[i][u].x ^ v[i][u].y ^ v[i][u].z ^ v[i][u].w;
    }
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

// Median of 7 launches after one warm-up (the L2 is not flushed: 1 GiB
// streams past it anyway).
template <typename F>
float time_us(F f) {
  return median_us(1, 7, [] {}, f);
}

int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t bytes = size_t(1) << 30;
  uint4* buf;
  unsigned* sink;
  CK(cudaMalloc(&buf, bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(buf, 1, bytes));
  const size_t n = bytes / 16;
  const float sw = time_us([&] { sweep<<<sms * 8, 256>>>(buf, n, sink); });
  std::printf("sweep (read ceiling pattern): %.1f us, %.0f GB/s\n", sw, bytes / sw / 1e3);
  for (int row_bytes : {14336, 4096}) {
    const int row_chunks = row_bytes / 16, rows = int(bytes / row_bytes);
    auto run = [&](const char* name, auto kernel, int ctas_per_sm) {
      const float t = time_us([&] { kernel<<<sms * ctas_per_sm, 256>>>(buf, rows, row_chunks, sink); });
      std::printf("  rows of %5d B, %-22s %d CTAs/SM: %7.1f us, %5.0f GB/s (%.1f%% of sweep)\n", row_bytes, name,
                  ctas_per_sm, t, double(rows) * row_bytes / t / 1e3, 100.0 * sw / t * double(rows) * row_bytes / bytes);
    };
    for (int c : {2, 3}) {
      run("16 rows x 1 chunk", rows_kernel<16, 1>, c);
      run("8 rows x 2 chunks", rows_kernel<8, 2>, c);
      run("4 rows x 4 chunks", rows_kernel<4, 4>, c);
      run("2 rows x 8 chunks", rows_kernel<2, 8>, c);
      run("1 row x 16 chunks", rows_kernel<1, 16>, c);
      run("8 rows x 1 chunk", rows_kernel<8, 1>, c);
      run("4 rows x 2 chunks", rows_kernel<4, 2>, c);
    }
  }
  return 0;
}
