// Refusing cases whose tensors cannot exist, before anything is generated:
// a --shape such as T=2^32 with H=2^32 would overflow the element count (and
// a host loop over 2^32 tokens would run for hours) instead of failing.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>

#include "tilecraft/error.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::harness {

double host_memory_bytes() { return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)); }

void check_case_fits(const Case& c, DeviceType backend, int device) {
  std::map<std::string, double> sym;
  for (const auto& [k, v] : c.workload->symbols) sym[k] = double(v);
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
          known = false;  // a symbol derived from generated data (rows, ...): sized by the adapter
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
