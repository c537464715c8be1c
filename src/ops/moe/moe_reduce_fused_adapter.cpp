// Harness face of moe_reduce_fused: routing generators and the f64 check.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tilecraft/error.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/ops/moe_reduce_fused.h"
#include "tilecraft/parallel.h"
#include "tilecraft/reference/moe_reduce_fused.h"

namespace tilecraft::harness {
namespace {

constexpr const char* kOp = "moe_reduce_fused";
// Random streams: one per input, so adding an input never shifts another's values.
enum Stream : uint64_t { kRouting = 1, kX, kWeights, kXsf, kSf };

struct Routing {
  std::vector<int32_t> pos;  // [T, K]
  int64_t T = 0, E = 0, valid = 0;
};

int64_t sym(const WorkloadSpec& w, const char* s) { return w.symbols.at(s); }

// K distinct experts per token, uniformly; then expert-major positions (stable
// by token), as a dispatch would lay rows out. ep > 1 keeps only the experts
// of rank 0 ([0, experts/ep)), sets the other slots to -1 and drops tokens left
// with no valid slot, as an expert-parallel rank sees its share.
Routing make_routing(const WorkloadSpec& w, uint64_t seed) {
  const int64_t T = sym(w, "T"), K = sym(w, "K"), experts = sym(w, "experts"), ep = sym(w, "ep");
  const std::string kind = w.params.at("routing");
  auto bad = [&](const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: workload '{}': {}", kOp, w.name, what));
  };
  if (kind != "uniform" && kind != "ep_local" && kind != "all_skip" && kind != "duplicate")
    bad("routing '" + kind + "' is not one of uniform, ep_local, all_skip, duplicate");
  if (K < 1) bad("K must be >= 1");
  Routing r;
  if (kind == "all_skip") {
    r.T = T;
    r.E = std::max<int64_t>(T, 1);
    r.pos.assign(size_t(T * K), -1);
    return r;
  }
  if (K > experts) bad(fmt::format("K = {} exceeds experts = {}", K, experts));
  if (ep < 1 || experts % ep) bad(fmt::format("ep = {} must divide experts = {}", ep, experts));
  const int64_t local = kind == "ep_local" ? experts / ep : experts;

  std::vector<int32_t> ids(size_t(T * K));
  std::vector<int32_t> perm(static_cast<size_t>(experts));
  for (int64_t t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t k = 0; k < K; ++k) {  // partial Fisher-Yates
      uint64_t j = uint64_t(k) + random_bits(seed, kRouting, uint64_t(t * K + k)) % uint64_t(experts - k);
      std::swap(perm[size_t(k)], perm[size_t(j)]);
      ids[size_t(t * K + k)] = perm[size_t(k)] < local ? perm[size_t(k)] : -1;
    }
  }
  std::vector<int64_t> kept;
  for (int64_t t = 0; t < T; ++t) {
    bool any = false;
    for (int64_t k = 0; k < K; ++k) any |= ids[size_t(t * K + k)] >= 0;
    if (any || kind != "ep_local") kept.push_back(t);
  }
  r.T = int64_t(kept.size());
  std::vector<int64_t> count(size_t(local) + 1, 0);
  for (int64_t t : kept)
    for (int64_t k = 0; k < K; ++k)
      if (int32_t e = ids[size_t(t * K + k)]; e >= 0) ++count[size_t(e) + 1];
  std::partial_sum(count.begin(), count.end(), count.begin());
  r.pos.assign(size_t(r.T * K), -1);
  for (int64_t i = 0; i < r.T; ++i)
    for (int64_t k = 0; k < K; ++k)
      if (int32_t e = ids[size_t(kept[size_t(i)] * K + k)]; e >= 0) r.pos[size_t(i * K + k)] = int32_t(count[size_t(e)]++);
  r.E = count[size_t(local) - 1];
  if (kind == "duplicate" && K >= 2)
    for (int64_t t = 0; t < r.T; ++t) r.pos[size_t(t * K + K - 1)] = r.pos[size_t(t * K)];
  for (int32_t p : r.pos) r.valid += p >= 0;
  if (r.E == 0) r.E = 1;  // keep x a real allocation when nothing routes here
  return r;
}

// Refuses workloads whose inputs, outputs and golden cannot fit in this
// machine's memory, before allocating anything.
void check_host_memory(const WorkloadSpec& w, DType dt) {
  const double T = double(sym(w, "T")), K = double(sym(w, "K")), H = double(sym(w, "H"));
  const double need = T * K * H * double(dtype_size(dt)) + 3 * T * H * 8 + T * K * 16;
  const double have = host_memory_bytes();
  if (need > 0.8 * have)
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}' needs about {:.1f} GB of host memory for inputs, output and golden; "
                            "this machine has {:.1f} GB",
                            kOp, w.name, need / 1e9, have / 1e9));
}

reference::MoeReduceFusedRef ref_of(const CaseData& d, const TensorView& out) {
  auto opt = [&](const char* n) -> const float* {
    auto it = d.inputs.find(n);
    return it == d.inputs.end() ? nullptr : it->second.ptr<float>();
  };
  const HostTensor& x = d.inputs.at("x");
  const HostTensor& pos = d.inputs.at("token_topk_to_pos");
  return {x.data(), x.dtype(), pos.ptr<int32_t>(), opt("topk_weights"), opt("x_sf"), opt("sf"), out.data,
          out.dtype, pos.shape()[0], pos.shape()[1], x.shape()[1], x.shape()[0]};
}

ops::MoeReduceFusedArgs args_of(const std::map<std::string, TensorView>& in, const TensorView& out) {
  ops::MoeReduceFusedArgs a;
  a.x = in.at("x");
  a.token_topk_to_pos = in.at("token_topk_to_pos");
  if (auto it = in.find("topk_weights"); it != in.end()) a.topk_weights = it->second;
  if (auto it = in.find("x_sf"); it != in.end()) a.x_sf = it->second;
  if (auto it = in.find("sf"); it != in.end()) a.sf = it->second;
  a.out = out;
  return a;
}

ops::MoeReduceFusedOptions op_options(const RunOptions& o) {
  ops::MoeReduceFusedOptions m;
  m.checked = o.checked;
  m.compile = o.compile;
  for (auto& [k, v] : o.config) {
    if (k == "vec") m.vec = v;
    else if (k == "items") m.items = v;
    else if (k == "block") m.block = v;
    else if (k == "hints") m.hints = v;
    else if (k == "ctas_per_sm") m.ctas_per_sm = v;
    else
      throw_arg_error(ErrorKind::kInvalidArgument, kOp, o.config_arg, "keys vec, items, block, hints, ctas_per_sm",
                      "'" + k + "'");
  }
  return m;
}

DType out_dtype_of(const VariantSpec& v, DType in) {
  return v.out_dtype == "input" ? in : *parse_dtype(v.out_dtype);
}

class MoeReduceFusedAdapter final : public OpAdapter {
 public:
  std::string name() const override { return kOp; }

  CaseData generate(const Case& c) const override {
    const WorkloadSpec& w = *c.workload;
    const VariantSpec& v = *c.variant;
    const DType dt = *parse_dtype(w.dtype);
    check_host_memory(w, dt);
    Routing r = make_routing(w, c.seed);
    const int64_t K = sym(w, "K"), H = sym(w, "H");
    CaseData d;
    HostTensor pos(DType::kI32, {r.T, K});
    std::copy(r.pos.begin(), r.pos.end(), pos.ptr<int32_t>());
    d.inputs["token_topk_to_pos"] = pos;
    HostTensor x(dt, {r.E, H});
    fill_uniform(x.view(), c.seed, kX, -1.f, 1.f);
    d.inputs["x"] = x;
    if (v.uses_input("topk_weights")) {
      HostTensor wt(DType::kF32, {r.T, K});
      fill_uniform(wt.view(), c.seed, kWeights, 0.f, 1.f);
      d.inputs["topk_weights"] = wt;
    }
    if (v.uses_input("x_sf")) {
      HostTensor s(DType::kF32, {r.E});
      fill_uniform(s.view(), c.seed, kXsf, -2.f, 2.f);
      d.inputs["x_sf"] = s;
    }
    if (v.uses_input("sf")) {
      // Random sign and a magnitude up to 64: some outputs saturate at +-448.
      HostTensor s(DType::kF32, {1});
      float mag = 0.5f + 63.5f * random_unit(c.seed, kSf, 0);
      s.ptr<float>()[0] = (random_bits(c.seed, kSf, 1) & 1) ? -mag : mag;
      d.inputs["sf"] = s;
    }
    d.outputs = {{"out", out_dtype_of(v, dt), {r.T, H}}};
    d.symbols = {{"T", double(r.T)}, {"K", double(K)}, {"H", double(H)}, {"E", double(r.E)},
                 {"V", double(r.valid)}, {"elem_bytes", double(dtype_size(dt))},
                 {"experts", double(sym(w, "experts"))}, {"ep", double(sym(w, "ep"))}};
    return d;
  }

  void golden(const CaseData& d, const Tensors& outs) const override {
    auto r = ref_of(d, outs.at("out"));
    parallel_for(r.T, r.H * r.K, [&r](int64_t b, int64_t e) { reference::moe_reduce_fused_rows(r, b, e); });
  }

  void run(const CaseData&, const Tensors& in, const Tensors& outs, DeviceType backend, CUstream stream,
           const RunOptions& o) const override {
    const TensorView& out = outs.at("out");
    if (backend == DeviceType::kCUDA) ops::moe_reduce_fused(args_of(in, out), stream, op_options(o));
    else ops::moe_reduce_fused_cpu(args_of(in, out), o.checked);
  }

  F64Check check_f64(const CaseData& d, const Tensors& outs) const override {
    const TensorView& out = outs.at("out");
    auto r = ref_of(d, out);
    // Tokens in parallel, a block at a time: the float64 sums of a block, then
    // its elements compared, each token's check merged in token order. (Its
    // own element step, not F64Check::add: an allowed error of 0 is exact
    // here, and a failure is an excess over 1.)
    constexpr int64_t kBlock = 64;
    std::vector<F64Check> part(size_t(r.T));
    parallel_for(r.T, r.H * r.K, [&](int64_t tb, int64_t te) {
      std::vector<double> ref(size_t(kBlock * r.H)), bound(ref.size());
      for (int64_t t0 = tb; t0 < te; t0 += kBlock) {
        const int64_t t1 = std::min(te, t0 + kBlock);
        reference::moe_reduce_fused_f64(r, ref.data(), bound.data(), t0, t1);
        for (int64_t t = t0; t < t1; ++t) {
          F64Check& pc = part[size_t(t)];
          for (int64_t h = 0; h < r.H; ++h) {
            const size_t i = size_t(t * r.H + h), j = size_t((t - t0) * r.H + h);
            const double got = load_as_double(out.data, out.dtype, i);
            double want = ref[j], allowed = bound[j];
            if (out.dtype == DType::kF8E4M3) {
              want = std::clamp(want, -448.0, 448.0);  // saturating cast
              // Half an fp8 ulp (3-bit mantissa).
              allowed += std::max(std::fabs(want) * 0.0625, 0.5 * std::ldexp(1.0, -9));
            } else if (out.dtype != DType::kF32) {
              // The output's rounding. (It was |want| 2^-11 over a floor of
              // 6.1e-5: just under fp16's least normal 2^-14, so a subnormal
              // output that rounded a tie away from the exact value failed
              // by 0.03-0.06%; the random reduce draws found four in 28.8
              // million, GPU and CPU alike.)
              allowed += half_ulp(out.dtype, want);
            }
            const double err = std::isnan(got) ? INFINITY : std::fabs(got - want);
            const double excess = allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0);
            pc.max_abs_err = std::max(pc.max_abs_err, err);
            pc.max_excess = std::max(pc.max_excess, excess);
            if (excess > 1) {
              if (pc.first_failed < 0) pc.first_failed = int64_t(i);
              ++pc.num_failed;
            }
          }
        }
      }
    });
    F64Check c;
    for (const F64Check& pc : part) c.merge(pc);
    return c;
  }

  std::vector<jit::KernelSpec> kernels(const Case& c, const RunOptions& o) const override {
    const WorkloadSpec& w = *c.workload;
    const int64_t T = sym(w, "T"), K = sym(w, "K"), H = sym(w, "H");
    if (T == 0 || H == 0) return {};
    const DType dt = *parse_dtype(w.dtype);
    // Allocations are 256-byte aligned, so stand-in pointers decide the vector width.
    void* fake = reinterpret_cast<void*>(uintptr_t(1) << 20);
    Device dev{DeviceType::kCUDA, 0};
    ops::MoeReduceFusedArgs a;
    a.x = TensorView(fake, dt, {T * K, H}, dev);
    a.token_topk_to_pos = TensorView(fake, DType::kI32, {T, K}, dev);
    if (c.variant->uses_input("topk_weights")) a.topk_weights = TensorView(fake, DType::kF32, {T, K}, dev);
    if (c.variant->uses_input("x_sf")) a.x_sf = TensorView(fake, DType::kF32, {T * K}, dev);
    if (c.variant->uses_input("sf")) a.sf = TensorView(fake, DType::kF32, {1}, dev);
    a.out = TensorView(fake, out_dtype_of(*c.variant, dt), {T, H}, dev);
    ops::validate_moe_reduce_fused(a, DeviceType::kCUDA);
    return {ops::moe_reduce_fused_config(a, op_options(o)).kernel_spec()};
  }
};

}  // namespace

std::unique_ptr<OpAdapter> make_moe_reduce_fused_adapter() { return std::make_unique<MoeReduceFusedAdapter>(); }

}  // namespace tilecraft::harness
