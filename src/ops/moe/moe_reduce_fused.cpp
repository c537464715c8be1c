#include "tilecraft/ops/moe_reduce_fused.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "moe/reduce_fused_params.cuh"
#include "ops/check.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/jit/op_kernel_cache.h"
#include "tilecraft/parallel.h"
#include "tilecraft/reference/moe_reduce_fused.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
namespace {

constexpr const char* kOp = "moe_reduce_fused";
constexpr int kMaxKernelTopK = 32;  // K is a template constant; rows live in registers

std::string shape_expect(std::initializer_list<std::string> dims) {
  std::string s = "[";
  int i = 0;
  for (auto& d : dims) s += (i++ ? ", " : "") + d;
  return s + "]";
}

void check_tensor(const TensorView& t, const char* arg, std::initializer_list<DType> dtypes, int rank,
                  const Device& on) {
  ops::check_tensor(t, kOp, arg, dtypes, rank, on);
}

reference::MoeReduceFusedRef to_ref(const MoeReduceFusedArgs& a) {
  reference::MoeReduceFusedRef r{};
  r.x = a.x.data; r.x_dtype = a.x.dtype;
  r.pos = a.token_topk_to_pos.ptr<int32_t>();
  r.weights = a.topk_weights ? a.topk_weights->ptr<float>() : nullptr;
  r.x_sf = a.x_sf ? a.x_sf->ptr<float>() : nullptr;
  r.sf = a.sf ? a.sf->ptr<float>() : nullptr;
  r.out = a.out.data; r.out_dtype = a.out.dtype;
  r.T = a.token_topk_to_pos.shape[0]; r.K = a.token_topk_to_pos.shape[1];
  r.H = a.x.shape[1]; r.E = a.x.shape[0];
  return r;
}

[[noreturn]] void throw_bad_position(int64_t flat, int64_t K, int64_t value, int64_t E, int64_t count) {
  throw Error(ErrorKind::kIndex,
              fmt::format("{}: argument 'token_topk_to_pos': expected -1 or a row of x in [0, {}), got {} at "
                          "token {}, slot {} ({} slot(s) out of range)",
                          kOp, E, value, flat / K, flat % K, count));
}

int pick_vec(const MoeReduceFusedArgs& a) {
  const size_t in = dtype_size(a.x.dtype), out = dtype_size(a.out.dtype);
  const int64_t H = a.x.shape[1];
  for (int v = int(16 / in); v > 1; v /= 2) {
    if (H % v) continue;
    if (reinterpret_cast<uintptr_t>(a.x.data) % (v * in)) continue;
    if (reinterpret_cast<uintptr_t>(a.out.data) % (v * out)) continue;
    return v;
  }
  return 1;
}

struct Launch {
  unsigned grid_x, grid_y, block;
};

// Blocks tile one token row (blockIdx.x) and walk tokens (blockIdx.y). The
// block is the configured size, shrunk to the row when the row is shorter.
Launch launch_geometry(const MoeReduceFusedConfig& c, int chunks_per_row, int64_t T, int device) {
  const int threads_per_row = (chunks_per_row + c.items - 1) / c.items;
  const int block = std::min(c.block, (threads_per_row + 31) / 32 * 32);
  const int per_block = block * c.items;
  const unsigned gx = unsigned((chunks_per_row + per_block - 1) / per_block);
  int64_t gy = std::min<int64_t>(T, 65535);
  if (c.ctas_per_sm) {
    int64_t ctas = int64_t(c.ctas_per_sm) * rt::device_info(device).sm_count;
    gy = std::min<int64_t>(gy, std::max<int64_t>(1, (ctas + gx - 1) / gx));
  }
  return {gx, unsigned(gy), unsigned(block)};
}

// A block size that splits a row of `threads` evenly, so no block idles at the
// row's end; 128 first (best measured on H200 for 2K..7K hidden), 128 when
// none divides.
int pick_block(int threads) {
  if (threads <= 128) return (threads + 31) / 32 * 32;
  for (int b : {128, 96, 160, 192, 224, 256, 64})
    if (threads % b == 0) return b;
  return 128;
}

}  // namespace

std::string MoeReduceFusedConfig::str() const {
  return fmt::format("{}->{} K={} vec={} items={} block={} hints={}{}{}{}{}{}", dtype_name(in), dtype_name(out), k, vec,
                     items, block, hints, ctas_per_sm ? fmt::format(" ctas/sm={}", ctas_per_sm) : "",
                     weights ? " +w" : "", x_sf ? " +x_sf" : "", sf ? " +sf" : "", checked ? " checked" : "");
}

uint64_t MoeReduceFusedConfig::code() const {
  // Every field that selects a kernel or a launch shape, packed.
  uint64_t v = uint64_t(in) | uint64_t(out) << 4 | uint64_t(k) << 8 | uint64_t(vec) << 16 | uint64_t(items) << 22 |
               uint64_t(block) << 26 | uint64_t(hints) << 36 | uint64_t(ctas_per_sm) << 40;
  return v | uint64_t(weights) << 48 | uint64_t(x_sf) << 49 | uint64_t(sf) << 50 | uint64_t(checked) << 51;
}

jit::KernelSpec MoeReduceFusedConfig::kernel_spec() const {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  return jit::KernelSpec{
      "moe/reduce_fused.cuh",
      "tc::moe::reduce_fused_kernel",
      {dtype_kernel_type(in), dtype_kernel_type(out), std::to_string(k), std::to_string(vec), std::to_string(items),
       b(weights), b(x_sf), b(sf), b(checked), std::to_string(hints)},
      str(),
      true};
}

void validate_moe_reduce_fused(const MoeReduceFusedArgs& a, DeviceType backend) {
  const Device on = tensors_device(backend, a.x);  // every tensor must be on it
  check_tensor(a.x, "x", {DType::kF32, DType::kBF16, DType::kF16}, 2, on);
  check_tensor(a.token_topk_to_pos, "token_topk_to_pos", {DType::kI32}, 2, on);
  const int64_t E = a.x.shape[0], H = a.x.shape[1];
  const int64_t T = a.token_topk_to_pos.shape[0], K = a.token_topk_to_pos.shape[1];
  TC_CHECK_ARG(K >= 1, kOp, "token_topk_to_pos", "at least one slot per token (K >= 1)",
               a.token_topk_to_pos.describe());
  TC_CHECK_ARG(E <= INT_MAX && H <= INT_MAX, kOp, "x", "fewer than 2^31 rows and columns", a.x.describe());
  if (a.topk_weights) {
    check_tensor(*a.topk_weights, "topk_weights", {DType::kF32}, 2, on);
    TC_CHECK_ARG(a.topk_weights->shape == a.token_topk_to_pos.shape, kOp, "topk_weights",
                 "shape " + a.token_topk_to_pos.shape.str() + " (that of token_topk_to_pos, [T, K])",
                 a.topk_weights->describe());
  }
  if (a.x_sf) {
    check_tensor(*a.x_sf, "x_sf", {DType::kF32}, 1, on);
    TC_CHECK_ARG(a.x_sf->shape[0] == E, kOp, "x_sf", fmt::format("one scale per row of x: shape [{}]", E),
                 a.x_sf->describe());
  }
  check_tensor(a.out, "out", {a.x.dtype, DType::kF8E4M3}, 2, on);
  TC_CHECK_ARG(a.out.shape == Shape({T, H}), kOp, "out", "shape " + shape_expect({std::to_string(T), std::to_string(H)}) + " ([T, H])",
               a.out.describe());
  if (a.sf) {
    check_tensor(*a.sf, "sf", {DType::kF32}, 1, on);
    TC_CHECK_ARG(a.sf->shape[0] == 1, kOp, "sf", "shape [1]", a.sf->describe());
    TC_CHECK_ARG(a.out.dtype == DType::kF8E4M3, kOp, "sf", "no global scale unless out is fp8_e4m3",
                 "sf given with out " + a.out.describe());
  }
  if (backend == DeviceType::kCUDA) {
    TC_CHECK_ARG(K <= kMaxKernelTopK, kOp, "token_topk_to_pos",
                 fmt::format("at most {} slots per token on the CUDA backend", kMaxKernelTopK),
                 a.token_topk_to_pos.describe());
    int dev = a.x.device.index;
    auto same_dev = [&](const TensorView& t, const char* arg) {
      TC_CHECK_ARG(t.device.index == dev, kOp, arg, fmt::format("a tensor on cuda:{} (where x is)", dev),
                   t.describe());
    };
    same_dev(a.token_topk_to_pos, "token_topk_to_pos");
    same_dev(a.out, "out");
    if (a.topk_weights) same_dev(*a.topk_weights, "topk_weights");
    if (a.x_sf) same_dev(*a.x_sf, "x_sf");
    if (a.sf) same_dev(*a.sf, "sf");
  }
}

MoeReduceFusedConfig moe_reduce_fused_config(const MoeReduceFusedArgs& a, const MoeReduceFusedOptions& o) {
  MoeReduceFusedConfig c{};
  c.in = a.x.dtype;
  c.out = a.out.dtype;
  c.k = int(a.token_topk_to_pos.shape[1]);
  c.weights = a.topk_weights.has_value();
  c.x_sf = a.x_sf.has_value();
  c.sf = a.sf.has_value();
  c.checked = o.checked;
  c.vec = pick_vec(a);
  if (o.vec) {
    const int64_t H = a.x.shape[1];
    TC_CHECK_ARG(o.vec <= c.vec && c.vec % o.vec == 0 && H % o.vec == 0, kOp, "vec",
                 fmt::format("a power of two dividing {} (widest allowed here)", c.vec), std::to_string(o.vec));
    c.vec = o.vec;
  }
  c.items = o.items ? o.items : 1;
  c.hints = o.hints >= 0 ? o.hints : 1;  // streaming stores: measured best on H200
  TC_CHECK_ARG(c.hints >= 0 && c.hints <= 3, kOp, "hints", "0..3", std::to_string(c.hints));
  c.ctas_per_sm = o.ctas_per_sm;
  TC_CHECK_ARG(c.ctas_per_sm >= 0 && c.ctas_per_sm <= 64, kOp, "ctas_per_sm", "0..64", std::to_string(c.ctas_per_sm));
  TC_CHECK_ARG(c.items >= 1 && c.items <= 4, kOp, "items", "1..4", std::to_string(c.items));
  c.block = o.block ? o.block : pick_block(int((a.x.shape[1] / c.vec + c.items - 1) / c.items));
  TC_CHECK_ARG(c.block >= 32 && c.block <= 256 && c.block % 32 == 0, kOp, "block", "a multiple of 32 in 32..256",
               std::to_string(c.block));
  return c;
}

void moe_reduce_fused(const MoeReduceFusedArgs& a, CUstream stream, const MoeReduceFusedOptions& o) {
  validate_moe_reduce_fused(a, DeviceType::kCUDA);
  const int64_t T = a.token_topk_to_pos.shape[0], K = a.token_topk_to_pos.shape[1];
  const int64_t E = a.x.shape[0], H = a.x.shape[1];
  if (T == 0 || H == 0) return;
  const DeviceCall call(a.x.device, stream, kOp);
  const MoeReduceFusedConfig c = moe_reduce_fused_config(a, o);

  static jit::OpKernelCache kernels;
  const jit::Launchable* k = &kernels.get(c.code(), o.compile, a.x.device.index, [&] { return c.kernel_spec(); });

  tc::moe::ReduceFusedParams p{a.x.data, a.token_topk_to_pos.ptr<int>(),
                                a.topk_weights ? a.topk_weights->ptr<float>() : nullptr,
                                a.x_sf ? a.x_sf->ptr<float>() : nullptr, a.sf ? a.sf->ptr<float>() : nullptr,
                                a.out.data, nullptr, (long long)T, int(H / c.vec), int(H), int(E)};
  const Launch g = launch_geometry(c, p.chunks_per_row, T, a.x.device.index);
  if (!o.checked) {
    jit::launch(*k, g.grid_x, g.grid_y, g.block, 0, stream, &p);
    return;
  }
  rt::ScratchBuffer scratch(2 * sizeof(int), stream);
  int init[2] = {INT_MAX, 0};
  TC_DRV(cuMemcpyHtoDAsync, scratch.get(), init, sizeof(init), stream);
  p.bad_slot = reinterpret_cast<int*>(scratch.get());
  jit::launch(*k, g.grid_x, g.grid_y, g.block, 0, stream, &p);
  int found[2];
  TC_DRV(cuMemcpyDtoHAsync, found, scratch.get(), sizeof(found), stream);
  TC_DRV(cuStreamSynchronize, stream);
  if (found[1] > 0) {
    int value = 0;
    TC_DRV(cuMemcpyDtoH, &value, reinterpret_cast<CUdeviceptr>(a.token_topk_to_pos.ptr<int>() + found[0]),
           sizeof(int));
    throw_bad_position(found[0], K, value, E, found[1]);
  }
}

void moe_reduce_fused_cpu(const MoeReduceFusedArgs& a, bool checked) {
  validate_moe_reduce_fused(a, DeviceType::kCPU);
  const auto r = to_ref(a);
  if (checked) {
    int64_t first = -1, count = 0;
    for (int64_t i = 0; i < r.T * r.K; ++i)
      if (r.pos[i] >= r.E) {
        if (first < 0) first = i;
        ++count;
      }
    if (count) throw_bad_position(first, r.K, r.pos[first], r.E, count);
  }
  parallel_for(r.T, r.H * r.K, [&r](int64_t b, int64_t e) { reference::moe_reduce_fused_rows(r, b, e); });
}

}  // namespace tilecraft::ops
