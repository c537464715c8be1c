// Refusing cases whose tensors cannot exist, before anything is generated:
// a --shape such as T=2^32 with H=2^32 would overflow the element count (and
// a host loop over 2^32 tokens would run for hours) instead of failing.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tilecraft/error.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::harness {

double host_memory_bytes() { return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)); }

std::map<std::string, double> planning_symbols(const Case& c) {
  std::map<std::string, double> sym;
  for (const auto& [k, v] : c.workload->symbols) sym[k] = double(v);
  const std::map<std::string, double> own = sym;  // estimates read the workload's symbols only
  for (const auto& [k, e] : c.op->estimates) {
    try {
      sym[k] = e.eval(own);
    } catch (const std::exception&) {
      // (a symbol the workload lacks: the derived one stays unknown, sized by the adapter)
    }
  }
  return sym;
}

namespace {
// A tensor of the case whose shape the planning symbols give.
struct Planned {
  std::string role, name, dims;
  double elems = 0, bytes = 0;
};

// The element size a tensor of the case takes: the variant's output dtype,
// else the workload's dtype where the tensor takes it, else the largest the
// tensor may have.
size_t planned_elem_size(const Case& c, const TensorSpec& t, bool output) {
  if (output && c.variant->out_dtype != "input")
    if (auto dt = parse_dtype(c.variant->out_dtype)) return dtype_size(*dt);
  if (std::count(t.dtypes.begin(), t.dtypes.end(), c.workload->dtype))
    if (auto dt = parse_dtype(c.workload->dtype)) return dtype_size(*dt);
  size_t elem = 1;
  for (const std::string& name : t.dtypes)
    if (auto dt = parse_dtype(name)) elem = std::max(elem, dtype_size(*dt));
  return elem;
}

// The case's inputs (those its variant uses) and outputs whose every
// dimension the planning symbols give; the others are sized by the adapter.
std::vector<Planned> planned_tensors(const Case& c, const std::map<std::string, double>& sym) {
  std::vector<Planned> out;
  for (const auto* list : {&c.op->inputs, &c.op->outputs}) {
    const bool output = list == &c.op->outputs;
    for (const TensorSpec& t : *list) {
      if (!output && t.optional && !c.variant->uses_input(t.name)) continue;
      Planned p{output ? "output" : "input", t.name, "", 1, 0};
      bool known = true;
      for (const std::string& d : t.shape) {
        double v = 0;
        try {
          v = Expr::parse(d).eval(sym);
        } catch (const std::exception&) {
          known = false;  // a symbol derived from generated data, not estimated
          break;
        }
        if (!std::isfinite(v)) {  // (rows / block_m where block_m = 0 is the op's own choice)
          known = false;
          break;
        }
        p.elems *= std::max(v, 1.0);
        p.dims += (p.dims.empty() ? "" : ", ") + fmt::format("{:.0f}", v);
      }
      if (!known) continue;
      p.bytes = p.elems * double(planned_elem_size(c, t, output));
      out.push_back(std::move(p));
    }
  }
  return out;
}

// "w_gate 7.5, w_up 7.5, ..." (GB), the largest first.
std::string largest(std::vector<Planned> ts) {
  std::sort(ts.begin(), ts.end(), [](const Planned& a, const Planned& b) { return a.bytes > b.bytes; });
  std::string s;
  for (size_t i = 0; i < ts.size() && i < 4; ++i) s += fmt::format("{}{} {:.2g}", i ? ", " : "", ts[i].name, ts[i].bytes / 1e9);
  return s;
}
}  // namespace

void check_cpu_stand_in_work(const Case& c) {
  const auto refuse = [&](const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': {}, too much for the CPU backend standing in for a missing GPU (it "
                            "would run for many minutes or hours); --backend cpu runs it anyway",
                            c.op->name, c.workload->name, what));
  };
  const std::map<std::string, double> sym = planning_symbols(c);
  double bytes = 0;
  const auto ts = planned_tensors(c, sym);
  for (const Planned& t : ts) bytes += t.bytes;
  if (bytes > kCpuStandInBytes)
    refuse(fmt::format("tensors of {:.3g} GB to generate and check on the host ({} GB; at most {:.0f})", bytes / 1e9,
                       largest(ts), kCpuStandInBytes / 1e9));
  double flops = 0;
  try {
    flops = c.variant->flops.eval(sym);
  } catch (const std::exception&) {
    return;  // a derived symbol without an estimate: nothing to judge by
  }
  if (flops > kCpuStandInFlops) refuse(fmt::format("about {:.2g} flops (at most {:.0g})", flops, kCpuStandInFlops));
}

void check_case_fits(const Case& c, DeviceType backend, int device) {
  const bool gpu = backend == DeviceType::kCUDA && rt::driver_available();
  const double limit = gpu ? double(rt::device_info(device).total_mem) : host_memory_bytes();
  const char* where = gpu ? "GPU" : "host";
  const auto ts = planned_tensors(c, planning_symbols(c));
  double total = 0;
  for (const Planned& t : ts) {
    if (t.elems >= 9.0e18 || t.bytes > limit)
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: workload '{}': {} '{}' of shape [{}] needs {:.3g} GB; the {} holds {:.1f} GB",
                              c.op->name, c.workload->name, t.role, t.name, t.dims, t.bytes / 1e9, where, limit / 1e9));
    total += t.bytes;
  }
  // Together, too: they live at once (on the host, beside the golden's own copies).
  const double room = gpu ? limit : 0.8 * limit;
  if (total > room)
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': its tensors need {:.3g} GB together ({} GB, ...); the {} holds {:.1f} "
                            "GB{}",
                            c.op->name, c.workload->name, total / 1e9, largest(ts), where, limit / 1e9,
                            gpu ? "" : " (at most 80% of it is planned for them)"));
}

}  // namespace tilecraft::harness
