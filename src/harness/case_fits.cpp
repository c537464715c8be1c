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
  for (const auto& [k, e] : c.op->estimates) sym[k] = e.eval(own);
  return sym;
}

void check_cpu_stand_in_work(const Case& c) {
  double flops = 0;
  try {
    flops = c.variant->flops.eval(planning_symbols(c));
  } catch (const std::exception&) {
    return;  // a derived symbol without an estimate: nothing to judge by
  }
  if (!(flops > kCpuStandInFlops)) return;  // (NaN: nothing to judge by either)
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("{}: workload '{}': about {:.2g} flops, too much for the CPU backend standing in for a "
                          "missing GPU (at most {:.0g}; it would run for many minutes or hours); --backend cpu "
                          "runs it anyway",
                          c.op->name, c.workload->name, flops, kCpuStandInFlops));
}

void check_case_fits(const Case& c, DeviceType backend, int device) {
  const std::map<std::string, double> sym = planning_symbols(c);
  const bool gpu = backend == DeviceType::kCUDA && rt::driver_available();
  const double limit = gpu ? double(rt::device_info(device).total_mem) : host_memory_bytes();
  for (const auto* list : {&c.op->inputs, &c.op->outputs})
    for (const TensorSpec& t : *list) {
      double n = 1;
      std::string dims;
      bool known = true;
      for (const std::string& d : t.shape) {
        double v = 0;
        try {
          v = Expr::parse(d).eval(sym);
        } catch (const std::exception&) {
          known = false;  // a symbol derived from generated data, not estimated: sized by the adapter
          break;
        }
        if (!std::isfinite(v)) {  // (rows / block_m where block_m = 0 is the op's own choice)
          known = false;
          break;
        }
        n *= std::max(v, 1.0);
        dims += (dims.empty() ? "" : ", ") + fmt::format("{:.0f}", v);
      }
      if (!known) continue;
      size_t elem = 1;
      for (const std::string& name : t.dtypes)
        if (auto dt = parse_dtype(name)) elem = std::max(elem, dtype_size(*dt));
      const double bytes = n * double(elem);
      if (n < 9.0e18 && bytes <= limit) continue;
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: workload '{}': {} '{}' of shape [{}] needs {:.3g} GB; the {} holds {:.1f} GB",
                              c.op->name, c.workload->name, list == &c.op->inputs ? "input" : "output", t.name, dims,
                              bytes / 1e9, gpu ? "GPU" : "host", limit / 1e9));
    }
}

}  // namespace tilecraft::harness
