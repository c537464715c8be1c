// tilecraft._C: the C++ library seen from Python. Tensors arrive through
// DLPack (torch, numpy, anything with __dlpack__) as zero-copy views; outputs
// are allocated by the Python layer with the caller's framework, so this
// module never owns tensor memory. CUDA work goes on the stream the caller
// passes (torch's current stream); CPU tensors run the CPU backend.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <deque>

#include "cli/commands.h"
#include "tilecraft/error.h"
#include "tilecraft/harness/env.h"
#include "tilecraft/harness/manifest.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/ops/moe_reduce_fused.h"
#include "tilecraft/ops/moe_topk_gate.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace nb = nanobind;
using namespace tilecraft;

namespace {

using Array = nb::ndarray<nb::ro>;
using OptArray = std::optional<Array>;

DType dtype_of(const Array& a, const char* op, const char* arg) {
  const auto d = a.dtype();
  using C = nb::dlpack::dtype_code;
  if (d.lanes == 1) {
    if (d.code == uint8_t(C::Float) && d.bits == 32) return DType::kF32;
    if (d.code == uint8_t(C::Float) && d.bits == 16) return DType::kF16;
    if (d.code == uint8_t(C::Bfloat) && d.bits == 16) return DType::kBF16;
    if (d.code == uint8_t(C::Int) && d.bits == 32) return DType::kI32;
    if (d.code == uint8_t(C::Int) && d.bits == 64) return DType::kI64;
    if (d.code == 10 && d.bits == 8) return DType::kF8E4M3;  // DLPack kDLFloat8_e4m3fn (newer headers name it)
  }
  throw_arg_error(ErrorKind::kType, op, arg, "a float32, float16, bfloat16, float8_e4m3fn, int32 or int64 tensor",
                  fmt::format("DLPack dtype code {} with {} bits x {} lanes", int(d.code), int(d.bits), int(d.lanes)));
}

// A zero-copy view of a DLPack tensor (strides kept: ops check contiguity).
TensorView view_of(const Array& a, const char* op, const char* arg) {
  TC_CHECK_ARG(a.ndim() <= size_t(kMaxDims), op, arg, fmt::format("at most {} dimensions", kMaxDims),
               std::to_string(a.ndim()));
  Shape shape, strides;
  shape.ndim = strides.ndim = int(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape[int(i)] = int64_t(a.shape(i));
    strides[int(i)] = int64_t(a.stride(i));
  }
  Device dev;
  if (a.device_type() == nb::device::cuda::value) dev = {DeviceType::kCUDA, int(a.device_id())};
  else if (a.device_type() == nb::device::cpu::value) dev = {DeviceType::kCPU, 0};
  else
    throw_arg_error(ErrorKind::kInvalidArgument, op, arg, "a CPU or CUDA tensor",
                    fmt::format("DLPack device type {}", int(a.device_type())));
  return TensorView(const_cast<void*>(a.data()), dtype_of(a, op, arg), shape, strides, dev);
}

std::optional<TensorView> opt_view(const OptArray& a, const char* op, const char* arg) {
  if (!a) return std::nullopt;
  return view_of(*a, op, arg);
}

DeviceType backend_of(const TensorView& t) { return t.device.type; }
CUstream stream_of(uint64_t s) { return reinterpret_cast<CUstream>(uintptr_t(s)); }

ops::ExpertWeights experts_of(const std::vector<Array>& w, bool stacked, const std::string& layout, const char* op,
                              const char* arg) {
  ops::ExpertWeights e;
  if (layout == "nk") e.layout = ops::WeightLayout::kNK;
  else if (layout == "kn") e.layout = ops::WeightLayout::kKN;
  else throw_arg_error(ErrorKind::kInvalidArgument, op, "layout", "'nk' or 'kn'", "'" + layout + "'");
  if (stacked) {
    TC_CHECK_ARG(w.size() == 1, op, arg, "one stacked tensor", fmt::format("{} tensors", w.size()));
    e.stacked = view_of(w[0], op, arg);
  } else {
    for (size_t i = 0; i < w.size(); ++i) e.per_expert.push_back(view_of(w[i], op, arg));
  }
  return e;
}

void reduce(const Array& x, const Array& pos, const OptArray& w, const OptArray& x_sf, const OptArray& sf,
            const Array& out, bool checked, uint64_t stream) {
  const char* op = "moe_reduce_fused";
  ops::MoeReduceFusedArgs a;
  a.x = view_of(x, op, "x");
  a.token_topk_to_pos = view_of(pos, op, "token_topk_to_pos");
  a.topk_weights = opt_view(w, op, "topk_weights");
  a.x_sf = opt_view(x_sf, op, "x_sf");
  a.sf = opt_view(sf, op, "sf");
  a.out = view_of(out, op, "out");
  nb::gil_scoped_release nogil;
  if (backend_of(a.x) == DeviceType::kCUDA) {
    ops::MoeReduceFusedOptions o;
    o.checked = checked;
    ops::moe_reduce_fused(a, stream_of(stream), o);
  } else {
    ops::moe_reduce_fused_cpu(a, checked);
  }
}

ops::MoeTopkGateParams gate_params(const char* op, const std::string& mode, bool renormalize, int n_group,
                                   int topk_group, float scale, const std::string& score_dtype) {
  ops::MoeTopkGateParams p;
  auto m = ops::parse_gate_mode(mode);
  if (!m) throw_arg_error(ErrorKind::kInvalidArgument, op, "mode", "'softmax_topk' or 'sigmoid_grouped_topk'",
                          "'" + mode + "'");
  p.mode = *m;
  p.renormalize = renormalize;
  p.n_group = n_group;
  p.topk_group = topk_group;
  p.scale = scale;
  auto sd = parse_dtype(score_dtype);
  if (!sd) throw_arg_error(ErrorKind::kInvalidArgument, op, "score_dtype", "fp32, fp16 or bf16", "'" + score_dtype + "'");
  p.score_dtype = *sd;
  return p;
}

void topk_gate(const Array& logits, const OptArray& bias, const Array& ids, const Array& weights,
               const std::string& mode, bool renormalize, int n_group, int topk_group, float scale,
               const std::string& score_dtype, uint64_t stream) {
  const char* op = "moe_topk_gate";
  ops::MoeTopkGateArgs a{view_of(logits, op, "logits"), opt_view(bias, op, "bias"), view_of(ids, op, "ids"),
                         view_of(weights, op, "weights")};
  const auto p = gate_params(op, mode, renormalize, n_group, topk_group, scale, score_dtype);
  nb::gil_scoped_release nogil;
  if (backend_of(a.logits) == DeviceType::kCUDA) ops::moe_topk_gate(a, p, stream_of(stream));
  else ops::moe_topk_gate_cpu(a, p);
}

void mapping(const Array& ids, const Array& counts, const Array& offsets, const Array& slot_pos,
             const Array& pos_to_token, const Array& tile_expert, const Array& num_tiles, int num_experts,
             int block_m, uint64_t stream) {
  const char* op = "moe_fused_mapping";
  ops::MoeFusedMappingArgs a{view_of(ids, op, "ids"),
                             view_of(counts, op, "tokens_per_expert"),
                             view_of(offsets, op, "expert_offsets"),
                             view_of(slot_pos, op, "token_topk_to_pos"),
                             view_of(pos_to_token, op, "pos_to_token"),
                             view_of(tile_expert, op, "tile_expert"),
                             view_of(num_tiles, op, "num_tiles")};
  const ops::MoeFusedMappingParams p{num_experts, block_m};
  nb::gil_scoped_release nogil;
  if (backend_of(a.ids) == DeviceType::kCUDA) ops::moe_fused_mapping(a, p, stream_of(stream));
  else ops::moe_fused_mapping_cpu(a, p);
}

void grouped_gemm(const Array& a_, const std::vector<Array>& w, bool stacked, const std::optional<std::vector<Array>>& w_up,
                  const std::string& layout, const OptArray& a_index, const OptArray& tile_expert,
                  const OptArray& num_tiles, const OptArray& row_scale, const OptArray& row_token, const Array& out,
                  const std::map<std::string, int>& config, uint64_t stream) {
  const char* op = "moe_grouped_gemm";
  ops::MoeGroupedGemmArgs a;
  a.a = view_of(a_, op, "a");
  a.w = experts_of(w, stacked, layout, op, "w");
  if (w_up) a.w_up = experts_of(*w_up, stacked, layout, op, "w_up");
  a.a_index = opt_view(a_index, op, "a_index");
  a.tile_expert = opt_view(tile_expert, op, "tile_expert");
  a.num_tiles = opt_view(num_tiles, op, "num_tiles");
  a.row_scale = opt_view(row_scale, op, "row_scale");
  a.row_token = opt_view(row_token, op, "row_token");
  a.out = view_of(out, op, "out");
  ops::MoeGroupedGemmOptions o;
  for (auto& [k, v] : config) ops::set_config_key(o.config, k, v, op, "config");
  nb::gil_scoped_release nogil;
  if (backend_of(a.a) == DeviceType::kCUDA) ops::moe_grouped_gemm(a, stream_of(stream), o);
  else ops::moe_grouped_gemm_cpu(a);
}

void fused_moe(const Array& x, const Array& w_router, const std::vector<Array>& w_gate, const std::vector<Array>& w_up,
               const std::vector<Array>& w_down, bool stacked, const std::string& layout, const OptArray& bias,
               const Array& out, const OptArray& ids, const OptArray& weights, int top_k, const std::string& mode,
               bool renormalize, int n_group, int topk_group, float scale, const std::string& score_dtype,
               bool given_routing, ops::FusedMoeWorkspace* ws, const std::map<std::string, int>& config,
               uint64_t stream) {
  const char* op = "fused_moe";
  const ops::FusedMoeOptions options = ops::fused_moe_options(config, "config");
  ops::FusedMoeArgs a;
  a.x = view_of(x, op, "x");
  a.w_router = view_of(w_router, op, "w_router");
  a.w_gate = experts_of(w_gate, stacked, layout, op, "w_gate");
  a.w_up = experts_of(w_up, stacked, layout, op, "w_up");
  a.w_down = experts_of(w_down, stacked, layout, op, "w_down");
  a.bias = opt_view(bias, op, "bias");
  a.out = view_of(out, op, "out");
  a.ids = opt_view(ids, op, "ids");
  a.weights = opt_view(weights, op, "weights");
  ops::FusedMoeParams p;
  p.top_k = top_k;
  p.gate = gate_params(op, mode, renormalize, n_group, topk_group, scale, score_dtype);
  p.given_routing = given_routing;
  nb::gil_scoped_release nogil;
  if (backend_of(a.x) == DeviceType::kCUDA) ops::fused_moe(a, p, stream_of(stream), ws, options);
  else ops::fused_moe_cpu(a, p);
}

// Kernels of every selected case compiled for `arch` (cached like any other compile).
std::vector<std::map<std::string, std::string>> compile(const std::string& op, const std::vector<std::string>& shapes,
                                                         const std::string& workload, const std::string& arch,
                                                         const std::string& options) {
  auto m = harness::Manifest::load();
  harness::Selection s;
  s.op = op;
  s.shapes = shapes;
  s.workload = workload;
  std::deque<harness::WorkloadSpec> storage;
  harness::RunOptions ro;
  ro.compile = jit::CompileOptions::parse(options);
  std::string target = arch;
  if (target.empty()) target = rt::driver_available() ? rt::device_info(0).arch() : "sm_90a";
  std::vector<std::map<std::string, std::string>> out;
  nb::gil_scoped_release nogil;
  for (auto& c : harness::select_cases(m, s, storage))
    for (auto& spec : harness::adapter_for(c.op->name).kernels(c, ro)) {
      auto k = jit::compile(spec, ro.compile, target);
      out.push_back({{"case", c.id()},
                     {"kernel", spec.short_name()},
                     {"config", spec.config},
                     {"arch", target},
                     {"registers", std::to_string(k->resources.registers)},
                     {"spill_bytes", std::to_string(k->resources.spill_store_bytes + k->resources.spill_load_bytes)},
                     {"compile_ms", fmt::format("{:.1f}", k->compile_ms)},
                     {"cache", k->disk_hit ? "disk" : "compiled or memory"}});
    }
  return out;
}

int run_cli(const std::vector<std::string>& args) {
  std::vector<std::string> store = args;
  store.insert(store.begin(), "tilecraft");
  std::vector<char*> argv;
  for (auto& a : store) argv.push_back(a.data());
  nb::gil_scoped_release nogil;
  return cli::run_main(int(argv.size()), argv.data());
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "tilecraft C++ core (see the tilecraft package for the documented API)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      switch (e.kind()) {
        case ErrorKind::kInvalidArgument:
        case ErrorKind::kIndex:
        case ErrorKind::kManifest: PyErr_SetString(PyExc_ValueError, e.what()); break;
        case ErrorKind::kType: PyErr_SetString(PyExc_TypeError, e.what()); break;
        default: PyErr_SetString(PyExc_RuntimeError, e.what()); break;
      }
    }
  });
  m.attr("__version__") = TILECRAFT_VERSION;
  nb::class_<ops::FusedMoeWorkspace>(m, "Workspace", "Device buffers a fused_moe layer keeps between calls")
      .def(nb::init<>())
      .def_prop_ro("bytes", &ops::FusedMoeWorkspace::bytes);
  m.def("moe_reduce_fused", &reduce, nb::arg("x"), nb::arg("token_topk_to_pos"), nb::arg("topk_weights").none(),
        nb::arg("x_sf").none(), nb::arg("sf").none(), nb::arg("out"), nb::arg("checked"), nb::arg("stream"));
  m.def("moe_topk_gate", &topk_gate, nb::arg("logits"), nb::arg("bias").none(), nb::arg("ids"), nb::arg("weights"),
        nb::arg("mode"), nb::arg("renormalize"), nb::arg("n_group"), nb::arg("topk_group"), nb::arg("scale"),
        nb::arg("score_dtype"), nb::arg("stream"));
  m.def("moe_fused_mapping", &mapping, nb::arg("ids"), nb::arg("tokens_per_expert"), nb::arg("expert_offsets"),
        nb::arg("token_topk_to_pos"), nb::arg("pos_to_token"), nb::arg("tile_expert"), nb::arg("num_tiles"),
        nb::arg("num_experts"), nb::arg("block_m"), nb::arg("stream"));
  m.def("moe_grouped_gemm", &grouped_gemm, nb::arg("a"), nb::arg("w"), nb::arg("stacked"), nb::arg("w_up").none(),
        nb::arg("layout"), nb::arg("a_index").none(), nb::arg("tile_expert").none(), nb::arg("num_tiles").none(),
        nb::arg("row_scale").none(), nb::arg("row_token").none(), nb::arg("out"), nb::arg("config"),
        nb::arg("stream"));
  m.def("fused_moe", &fused_moe, nb::arg("x"), nb::arg("w_router"), nb::arg("w_gate"), nb::arg("w_up"),
        nb::arg("w_down"), nb::arg("stacked"), nb::arg("layout"), nb::arg("bias").none(), nb::arg("out"),
        nb::arg("ids").none(), nb::arg("weights").none(), nb::arg("top_k"), nb::arg("mode"), nb::arg("renormalize"),
        nb::arg("n_group"), nb::arg("topk_group"), nb::arg("scale"), nb::arg("score_dtype"), nb::arg("given_routing"),
        nb::arg("workspace").none(), nb::arg("config"), nb::arg("stream"));
  m.def("mapping_rows", &ops::moe_fused_mapping_rows, nb::arg("T"), nb::arg("K"), nb::arg("E"), nb::arg("block_m"));
  m.def("grouped_gemm_block_m", &ops::moe_grouped_gemm_block_m, nb::arg("rows_per_expert"), nb::arg("wgmma") = false);
  m.def(
      "env_json",
      [](std::optional<int> device) {
        if (device) rt::check_ordinal(*device, "env", "device");
        return harness::capture_env(device.value_or(0)).j.dump();
      },
      nb::arg("device").none() = nb::none());
  m.def("compile", &compile, nb::arg("op"), nb::arg("shapes"), nb::arg("workload"), nb::arg("arch"),
        nb::arg("options"));
  m.def("run_cli", &run_cli, nb::arg("args"));
}
