#include <algorithm>
#include <set>

#include "tilecraft/error.h"
#include "tilecraft/jit/embedded_sources.h"

namespace tilecraft::jit {

const EmbeddedSource* find_embedded(std::string_view path) {
  for (const auto& s : embedded_sources())
    if (path == s.path) return &s;
  return nullptr;
}

namespace {
// The quoted includes of a header, in order. Kernel headers include each other
// by their path under kernels/ ("tile/vec.cuh"); <...> includes are CUDA's.
std::vector<std::string> quoted_includes(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = text.find("#include", pos)) != std::string_view::npos) {
    size_t eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, eol == std::string_view::npos ? text.npos : eol - pos);
    size_t q1 = line.find('"');
    size_t q2 = q1 == line.npos ? line.npos : line.find('"', q1 + 1);
    if (q2 != line.npos) out.emplace_back(line.substr(q1 + 1, q2 - q1 - 1));
    pos += 8;
  }
  return out;
}
}  // namespace

std::vector<const EmbeddedSource*> include_closure(std::string_view path) {
  const EmbeddedSource* root = find_embedded(path);
  if (!root) throw Error(ErrorKind::kInternal, fmt::format("jit: no embedded kernel header '{}'", path));
  std::set<std::string> seen{root->path};
  std::vector<const EmbeddedSource*> todo{root}, rest;
  while (!todo.empty()) {
    const EmbeddedSource* s = todo.back();
    todo.pop_back();
    for (const std::string& inc : quoted_includes(s->text)) {
      if (seen.count(inc)) continue;
      const EmbeddedSource* dep = find_embedded(inc);
      if (!dep)
        throw Error(ErrorKind::kInternal,
                    fmt::format("jit: kernel header '{}' includes '{}', which is not embedded", s->path, inc));
      seen.insert(inc);
      rest.push_back(dep);
      todo.push_back(dep);
    }
  }
  std::sort(rest.begin(), rest.end(), [](auto* a, auto* b) { return std::string_view(a->path) < b->path; });
  rest.insert(rest.begin(), root);
  return rest;
}

}  // namespace tilecraft::jit
