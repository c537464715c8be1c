// Harness face of moe_topk_gate: logits generators, a comparison that accepts
// either order of near-tied experts, and a float64 check of the selection.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/moe/routing_gen.h"
#include "tilecraft/error.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/ops/moe_topk_gate.h"
#include "tilecraft/parallel.h"
#include "tilecraft/reference/moe_topk_gate.h"

namespace tilecraft::harness {
namespace {

constexpr const char* kOp = "moe_topk_gate";
enum Stream : uint64_t { kLogits = 1, kBias };
// Two experts whose selection scores differ by less than this (relative) are
// a near-tie: fp32 rounding differences between backends may order them
// either way, and both orders are right.
constexpr double kTieTol = 1e-5;

ops::MoeTopkGateParams params_of(const WorkloadSpec& w) {
  ops::MoeTopkGateParams p;
  auto mode = ops::parse_gate_mode(w.params.at("mode"));
  if (!mode)
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': mode '{}' is not softmax_topk or sigmoid_grouped_topk", kOp, w.name,
                            w.params.at("mode")));
  p.mode = *mode;
  p.renormalize = workload_flag(kOp, w, "renormalize");
  p.n_group = int(w.symbols.at("n_group"));
  p.topk_group = int(w.symbols.at("topk_group"));
  const std::string& scores = w.params.at("scores");
  auto sd = parse_dtype(scores);
  if (!sd || (*sd != DType::kF32 && *sd != DType::kF16 && *sd != DType::kBF16))
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': scores '{}' is not fp32, fp16 or bf16", kOp, w.name, scores));
  p.score_dtype = *sd;
  p.scale = workload_number(kOp, w, "scale");
  return p;
}

ops::MoeTopkGateArgs args_of(const Tensors& in, const Tensors& out) {
  ops::MoeTopkGateArgs a;
  a.logits = in.at("logits");
  if (auto it = in.find("bias"); it != in.end()) a.bias = it->second;
  a.ids = out.at("ids");
  a.weights = out.at("weights");
  return a;
}

reference::MoeTopkGateRef ref_of(const CaseData& d, const Tensors& out, const ops::MoeTopkGateParams& p) {
  const HostTensor& l = d.inputs.at("logits");
  auto b = d.inputs.find("bias");
  return {l.ptr<float>(), b == d.inputs.end() ? nullptr : b->second.ptr<float>(), out.at("ids").ptr<int32_t>(),
          out.at("weights").ptr<float>(), l.shape()[0], l.shape()[1], out.at("ids").shape[1],
          p.mode == ops::GateMode::kSigmoidGroupedTopk, p.renormalize, p.n_group, p.topk_group, p.scale,
          ops::score_rounding(p.score_dtype)};
}

// expf on the device and std::exp here may round a score to neighbours.
double score_ulp(const ops::MoeTopkGateParams& p) { return ops::score_ulp(p.score_dtype); }

// Scores close enough that either order is a correct selection.
bool near(double a, double b, double ulp) {
  return std::fabs(a - b) <= kTieTol * std::max(1.0, std::fabs(b)) + 2 * ulp * std::fabs(b);
}

// sigmoid_grouped_topk in float64: the groups (top-2 sums of `sel`) the
// chosen experts lie in must be a correct choice of topk_group groups up to
// near-ties (a score rounded to its neighbour moves a group sum by a unit
// too), and `rival` marks the experts the chosen ones must beat: those of
// the chosen groups and of every group that is in the top topk_group however
// near-ties fall. False: the chosen experts span groups no correct choice keeps.
bool group_rivals(const std::vector<double>& sel, const std::vector<bool>& chosen, const ops::MoeTopkGateParams& p,
                  double ulp, std::vector<bool>& rival) {
  const int64_t E = int64_t(sel.size()), gs = E / p.n_group;
  std::vector<double> gscore(size_t(p.n_group));
  for (int g = 0; g < p.n_group; ++g) {
    std::vector<double> m(sel.begin() + g * gs, sel.begin() + (g + 1) * gs);
    std::sort(m.rbegin(), m.rend());
    gscore[size_t(g)] = m[0] + (gs > 1 ? m[1] : 0.0);
  }
  std::vector<double> sorted = gscore;
  std::sort(sorted.rbegin(), sorted.rend());
  const double last_in = sorted[size_t(p.topk_group - 1)];  // the topk_group-th best
  const double first_out = p.topk_group < p.n_group ? sorted[size_t(p.topk_group)] : -INFINITY;
  std::vector<bool> used(size_t(p.n_group), false);
  int n_used = 0;
  for (int64_t e = 0; e < E; ++e)
    if (chosen[size_t(e)] && !used[size_t(e / gs)]) used[size_t(e / gs)] = true, ++n_used;
  if (n_used > p.topk_group) return false;
  for (int g = 0; g < p.n_group; ++g) {
    const double s = gscore[size_t(g)];
    if (used[size_t(g)] && s < last_in && !near(s, last_in, ulp)) return false;  // clearly outside the top
    const bool surely_kept = s > first_out && !near(s, first_out, ulp);
    for (int64_t e = g * gs; e < (g + 1) * gs; ++e) rival[size_t(e)] = used[size_t(g)] || surely_kept;
  }
  return true;
}

class MoeTopkGateAdapter final : public OpAdapter {
 public:
  std::string name() const override { return kOp; }

  CaseData generate(const Case& c) const override {
    const WorkloadSpec& w = *c.workload;
    const int64_t T = w.symbols.at("T"), E = w.symbols.at("E"), K = w.symbols.at("K");
    auto p = params_of(w);
    // A shape the selection cannot have is refused here, as a workload that
    // cannot exist, not run into the golden as a failed case.
    reference::check_moe_topk_gate_shape(fmt::format("{}: workload '{}'", kOp, w.name), E, K,
                                         p.mode == ops::GateMode::kSigmoidGroupedTopk, p.n_group, p.topk_group);
    CaseData d;
    HostTensor logits(DType::kF32, {T, E});
    fill_uniform(logits.view(), c.seed, kLogits, -4.f, 4.f);
    if (w.params.at("logits") == "ties") {
      // Few distinct values: many exact ties, which must go to the smaller index.
      for (int64_t i = 0; i < T * E; ++i) logits.ptr<float>()[i] = std::round(logits.ptr<float>()[i]) * 0.5f;
    } else if (w.params.at("logits") != "uniform") {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: workload '{}': logits '{}' is not uniform or ties", kOp, w.name, w.params.at("logits")));
    }
    d.inputs["logits"] = logits;
    if (p.mode == ops::GateMode::kSigmoidGroupedTopk && w.params.at("bias") == "true") {
      HostTensor b(DType::kF32, {E});
      fill_uniform(b.view(), c.seed, kBias, -0.1f, 0.1f);
      d.inputs["bias"] = b;
    }
    d.outputs = {{"ids", DType::kI32, {T, K}}, {"weights", DType::kF32, {T, K}}};
    d.symbols = {{"T", double(T)}, {"E", double(E)}, {"K", double(K)}, {"n_group", double(p.n_group)},
                 {"topk_group", double(p.topk_group)}, {"sigmoid", p.mode == ops::GateMode::kSigmoidGroupedTopk ? 1.0 : 0.0},
                 {"renormalize", p.renormalize ? 1.0 : 0.0}, {"scale", double(p.scale)}};
    return d;
  }

  void golden(const CaseData& d, const Tensors& out) const override {
    auto r = ref_of(d, out, params_from(d));
    parallel_for(r.T, r.E * 8, [&r](int64_t b, int64_t e) { reference::moe_topk_gate_rows(r, b, e); });
  }

  void run(const CaseData& d, const Tensors& in, const Tensors& out, DeviceType backend, CUstream stream,
           const RunOptions& o) const override {
    auto p = params_from(d);
    if (backend == DeviceType::kCUDA) ops::moe_topk_gate(args_of(in, out), p, stream, o.compile);
    else ops::moe_topk_gate_cpu(args_of(in, out), p);
  }

  bool compare(const CaseData& d, const OpSpec& op, const Tensors& want, const Tensors& got,
               nlohmann::json& r) const override {
    auto p = params_from(d);
    auto ref = ref_of(d, want, p);
    const int64_t T = ref.T, E = ref.E, K = ref.K;
    std::vector<float> select(static_cast<size_t>(E)), weight(static_cast<size_t>(E));
    int64_t id_failed = 0, first = -1, swaps = 0;
    for (int64_t t = 0; t < T; ++t) {
      bool scored = false;
      for (int64_t k = 0; k < K; ++k) {
        const int32_t gw = want.at("ids").ptr<int32_t>()[t * K + k], gg = got.at("ids").ptr<int32_t>()[t * K + k];
        if (gw == gg) continue;
        if (!scored) {
          reference::moe_topk_gate_scores(ref, t, select.data(), weight.data());
          scored = true;
        }
        const bool ok = gg >= 0 && gg < E && near(select[size_t(gg)], select[size_t(gw)], score_ulp(p));
        if (ok) ++swaps;
        else {
          if (first < 0) first = t * K + k;
          ++id_failed;
        }
      }
    }
    nlohmann::json ids_rec{{"num_elements", T * K}, {"num_failed", id_failed}, {"near_tie_swaps", swaps}};
    if (first >= 0)
      ids_rec["first_failure"] = {{"index", first}, {"got", got.at("ids").ptr<int32_t>()[first]},
                                  {"want", want.at("ids").ptr<int32_t>()[first]}};
    nlohmann::json w_rec;
    Tolerance tol = op.tolerance;
    tol.rtol += score_ulp(p);  // a rounded score may land on the neighbouring value
    const bool w_ok = compare_tensor(tol, want.at("weights"), got.at("weights"), w_rec);
    r["outputs"] = {{"ids", ids_rec}, {"weights", w_rec}};
    r["compare_mode"] = "ids exact up to near-ties; weights allclose";
    r["num_elements"] = 2 * T * K;
    r["num_failed"] = id_failed + w_rec["num_failed"].get<int64_t>();
    r["max_abs_err"] = w_rec["max_abs_err"];
    r["max_rel_err"] = w_rec["max_rel_err"];
    r["atol"] = op.tolerance.atol;
    r["rtol"] = op.tolerance.rtol;
    r["nonfinite_outputs"] = w_rec["nonfinite_outputs"];
    r["pass_rate"] = T ? 1.0 - double(r["num_failed"].get<int64_t>()) / double(2 * T * K) : 1.0;
    if (first >= 0) r["first_failure"] = ids_rec["first_failure"];
    else if (w_rec.contains("first_failure")) r["first_failure"] = w_rec["first_failure"];
    return id_failed == 0 && w_ok;
  }

  // Independent check in float64: the chosen experts are a top-k of the
  // double-precision scores (up to near-ties), distinct, and their weights
  // match the double-precision weights.
  F64Check check_f64(const CaseData& d, const Tensors& out) const override {
    auto p = params_from(d);
    const HostTensor& l = d.inputs.at("logits");
    const int64_t T = l.shape()[0], E = l.shape()[1], K = out.at("ids").shape[1];
    auto bias = d.inputs.find("bias");
    F64Check c;
    std::vector<double> sel(static_cast<size_t>(E)), wt(static_cast<size_t>(E)), row(static_cast<size_t>(E));
    const int rnd = ops::score_rounding(p.score_dtype);
    const double ulp = score_ulp(p);
    auto round = [&](double v) { return rnd ? double(reference::round_score(float(v), rnd)) : v; };
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t e = 0; e < E; ++e) row[size_t(e)] = round(l.ptr<float>()[t * E + e]);
      if (p.mode == ops::GateMode::kSoftmaxTopk) {
        double m = -INFINITY, s = 0;
        for (int64_t e = 0; e < E; ++e) m = std::max(m, row[size_t(e)]);
        for (int64_t e = 0; e < E; ++e) s += std::exp(row[size_t(e)] - m);
        for (int64_t e = 0; e < E; ++e) sel[size_t(e)] = wt[size_t(e)] = round(std::exp(row[size_t(e)] - m) / s);
      } else {
        for (int64_t e = 0; e < E; ++e) {
          wt[size_t(e)] = round(1.0 / (1.0 + std::exp(-row[size_t(e)])));
          sel[size_t(e)] = wt[size_t(e)] + (bias != d.inputs.end() ? bias->second.ptr<float>()[e] : 0.0);
        }
      }
      const int32_t* ids = out.at("ids").ptr<int32_t>() + t * K;
      const float* w = out.at("weights").ptr<float>() + t * K;
      std::vector<bool> chosen(static_cast<size_t>(E), false);
      double denom = 0;
      bool bad = false;
      for (int64_t k = 0; k < K; ++k) {
        if (ids[k] < 0 || ids[k] >= E || chosen[size_t(ids[k])]) { bad = true; break; }
        chosen[size_t(ids[k])] = true;
        denom += wt[size_t(ids[k])];
      }
      // Which experts the chosen ones compete with: all, or with groups
      // those of the groups the backend kept, as far as they are determined.
      std::vector<bool> rival(static_cast<size_t>(E), true);
      if (!bad && p.mode == ops::GateMode::kSigmoidGroupedTopk && p.n_group > 1)
        bad = !group_rivals(sel, chosen, p, ulp, rival);
      if (!bad) {
        double worst_chosen = INFINITY, best_left = -INFINITY;
        for (int64_t e = 0; e < E; ++e) {
          if (chosen[size_t(e)])
            worst_chosen = std::min(worst_chosen, sel[size_t(e)]);
          else if (rival[size_t(e)])
            best_left = std::max(best_left, sel[size_t(e)]);
        }
        bad = worst_chosen < best_left && !near(worst_chosen, best_left, ulp);
        for (int64_t k = 0; k < K && !bad; ++k) {
          double want = wt[size_t(ids[k])] * (p.renormalize ? 1.0 / denom : 1.0) *
                        (p.mode == ops::GateMode::kSigmoidGroupedTopk ? p.scale : 1.0);
          double err = std::fabs(double(w[k]) - want);
          c.max_abs_err = std::max(c.max_abs_err, err);
          const double bound = 1e-6 + (1e-5 + 2 * ulp) * std::fabs(want);
          c.max_excess = std::max(c.max_excess, err / bound);
          bad = err > bound;
        }
      }
      if (bad) {
        if (c.first_failed < 0) c.first_failed = t;
        ++c.num_failed;
      }
    }
    return c;
  }

  std::vector<jit::KernelSpec> kernels(const Case& c, const RunOptions&) const override {
    const WorkloadSpec& w = *c.workload;
    const int64_t T = w.symbols.at("T"), E = w.symbols.at("E"), K = w.symbols.at("K");
    if (T == 0) return {};
    auto p = params_of(w);
    void* fake = reinterpret_cast<void*>(uintptr_t(1) << 20);
    Device dev{DeviceType::kCUDA, 0};
    ops::MoeTopkGateArgs a{TensorView(fake, DType::kF32, {T, E}, dev), std::nullopt,
                           TensorView(fake, DType::kI32, {T, K}, dev), TensorView(fake, DType::kF32, {T, K}, dev)};
    ops::validate_moe_topk_gate(a, p, DeviceType::kCUDA);
    return {ops::moe_topk_gate_kernel_spec(a, p)};
  }

 private:
  // The routing parameters travel in the case's symbols (mode, renormalize
  // and scale as numbers), so golden, run and compare read the same values.
  static ops::MoeTopkGateParams params_from(const CaseData& d) {
    ops::MoeTopkGateParams p;
    p.mode = d.symbols.at("sigmoid") != 0 ? ops::GateMode::kSigmoidGroupedTopk : ops::GateMode::kSoftmaxTopk;
    p.renormalize = d.symbols.at("renormalize") != 0;
    p.n_group = int(d.symbols.at("n_group"));
    p.topk_group = int(d.symbols.at("topk_group"));
    p.scale = float(d.symbols.at("scale"));
    return p;
  }
};

}  // namespace

std::unique_ptr<OpAdapter> make_moe_topk_gate_adapter() { return std::make_unique<MoeTopkGateAdapter>(); }

}  // namespace tilecraft::harness
