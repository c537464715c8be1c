#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "tilecraft/error.h"
#include "tilecraft/jit/embedded_sources.h"
#include "tilecraft/jit/hash.h"

namespace tilecraft::jit {

namespace {
// Texts read from a kernel directory; EmbeddedSource points into them.
struct DirSources {
  std::vector<std::string> paths, texts;
  std::vector<EmbeddedSource> list;
};

std::unique_ptr<DirSources>& active_dir() {
  static std::unique_ptr<DirSources> d;
  return d;
}

std::unique_ptr<DirSources> read_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir))
    throw_arg_error(ErrorKind::kInvalidArgument, "jit", "kernel dir", "a directory of *.cuh kernel headers",
                    "'" + dir + "'");
  auto d = std::make_unique<DirSources>();
  std::vector<fs::path> files;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".cuh") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    d->paths.push_back(fs::relative(f, dir).generic_string());
    d->texts.push_back(ss.str());
  }
  for (size_t i = 0; i < d->paths.size(); ++i) d->list.push_back({d->paths[i].c_str(), d->texts[i].c_str()});
  return d;
}

const EmbeddedSource* find_in(const std::vector<EmbeddedSource>& set, std::string_view path) {
  for (const auto& s : set)
    if (path == s.path) return &s;
  return nullptr;
}

// The parameter headers (*params.cuh: the structs the host fills and the
// kernels read) present in one set and absent or different in the other.
std::vector<std::string> differing_params(const std::vector<EmbeddedSource>& a, const std::vector<EmbeddedSource>& b) {
  const auto is_params = [](std::string_view p) {
    constexpr std::string_view kEnd = "params.cuh";
    return p.size() >= kEnd.size() && p.substr(p.size() - kEnd.size()) == kEnd;
  };
  std::set<std::string> out;
  for (const auto& s : a)
    if (is_params(s.path)) {
      const EmbeddedSource* other = find_in(b, s.path);
      if (!other || std::string_view(other->text) != s.text) out.insert(s.path);
    }
  for (const auto& s : b)
    if (is_params(s.path) && !find_in(a, s.path)) out.insert(s.path);
  return {out.begin(), out.end()};
}
}  // namespace

const std::vector<EmbeddedSource>& kernel_sources() {
  static const bool from_env = [] {
    if (const char* d = std::getenv("TILECRAFT_KERNEL_DIR"); d && *d) {
      // Kernels compiled from another tree read this build's launch structs:
      // a tree whose parameter headers differ would read them at other
      // offsets (wrong pointers, not an error), so it is refused.
      std::unique_ptr<DirSources> dir = read_dir(d);
      const std::vector<std::string> differ = differing_params(embedded_sources(), dir->list);
      if (!differ.empty()) {
        std::string names;
        for (const auto& n : differ) names += (names.empty() ? "" : ", ") + n;
        throw_arg_error(ErrorKind::kInvalidArgument, "jit", "TILECRAFT_KERNEL_DIR",
                        "kernel headers whose parameter headers (*params.cuh) equal this build's",
                        "'" + std::string(d) + "', where " + names + " differ");
      }
      active_dir() = std::move(dir);
    }
    return true;
  }();
  (void)from_env;
  return active_dir() ? active_dir()->list : embedded_sources();
}

const std::vector<EmbeddedSource>& kernel_sources(const std::string& dir) {
  if (dir.empty()) return kernel_sources();
  // Read once and kept for the process: compiled kernels' header hashes are
  // memoized by text address.
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<DirSources>> dirs;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<DirSources>& d = dirs[dir];
  if (!d) d = read_dir(dir);
  return d->list;
}

void set_kernel_dir(const std::string& dir) {
  kernel_sources();  // apply the environment first, so this call wins
  // Retired texts stay alive: header hashes are memoized by text address, and
  // a reused address must never alias a different text.
  static std::vector<std::unique_ptr<DirSources>> retired;
  if (active_dir()) retired.push_back(std::move(active_dir()));
  active_dir() = dir.empty() ? nullptr : read_dir(dir);
}

std::string kernel_sources_sha256() { return kernel_sources_sha256(""); }

std::string kernel_sources_sha256(const std::string& dir) {
  std::vector<const EmbeddedSource*> in_order;
  for (const auto& s : kernel_sources(dir)) in_order.push_back(&s);
  std::sort(in_order.begin(), in_order.end(),
            [](const EmbeddedSource* a, const EmbeddedSource* b) { return std::string_view(a->path) < b->path; });
  Sha256 h;
  for (const EmbeddedSource* s : in_order) h.field(s->path).field(s->text);
  return h.hex();
}

std::vector<std::string> params_headers_differing(const std::string& dir) {
  return differing_params(kernel_sources(), kernel_sources(dir));
}

const EmbeddedSource* find_embedded(std::string_view path) { return find_embedded(path, ""); }

const EmbeddedSource* find_embedded(std::string_view path, const std::string& dir) {
  return find_in(kernel_sources(dir), path);
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

std::vector<const EmbeddedSource*> include_closure(std::string_view path) { return include_closure(path, ""); }

std::vector<const EmbeddedSource*> include_closure(std::string_view path, const std::string& dir) {
  const EmbeddedSource* root = find_embedded(path, dir);
  if (!root) throw Error(ErrorKind::kInternal, fmt::format("jit: no embedded kernel header '{}'", path));
  std::set<std::string> seen{root->path};
  std::vector<const EmbeddedSource*> todo{root}, rest;
  while (!todo.empty()) {
    const EmbeddedSource* s = todo.back();
    todo.pop_back();
    for (const std::string& inc : quoted_includes(s->text)) {
      if (seen.count(inc)) continue;
      const EmbeddedSource* dep = find_embedded(inc, dir);
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
