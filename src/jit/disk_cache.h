#pragma once
// Disk cache entries: <dir>/kernels/<key[0:2]>/<key>.cubin and <key>.json.
// Writes go to a unique temp file renamed into place, so concurrent processes
// never observe a partial file; a reader that finds the metadata missing or
// not matching the cubin's hash treats the entry as absent.
#include <optional>

#include "tilecraft/jit/jit.h"

namespace tilecraft::jit::disk {

std::optional<CompiledKernel> load(const std::string& key);
void store(const CompiledKernel& k);  // best effort: failures are logged, not thrown

}  // namespace tilecraft::jit::disk
