#include "disk_cache.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/hash.h"

namespace tilecraft::jit::disk {
namespace fs = std::filesystem;
namespace {

fs::path entry_dir(const std::string& key) { return fs::path(cache_dir()) / "kernels" / key.substr(0, 2); }

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_atomic(const fs::path& target, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  fs::path tmp = target;
  tmp += fmt::format(".tmp.{}.{}.{}", getpid(), std::hash<std::thread::id>{}(std::this_thread::get_id()),
                     counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.flush();
    if (!out) throw std::runtime_error("write failed: " + tmp.string());
  }
  fs::rename(tmp, target);  // atomic within a filesystem
}

}  // namespace

std::optional<CompiledKernel> load(const std::string& key) {
  fs::path dir = entry_dir(key);
  auto meta_text = read_file(dir / (key + ".json"));
  if (!meta_text) return std::nullopt;
  auto cubin = read_file(dir / (key + ".cubin"));
  if (!cubin) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(*meta_text);
    if (j.at("cubin_sha256").get<std::string>() != sha256_hex(*cubin)) return std::nullopt;
    CompiledKernel k;
    k.key = key;
    k.cubin = std::move(*cubin);
    k.lowered_name = j.at("lowered_name");
    k.compile_ms = j.at("compile_ms");
    k.arch = j.at("arch");
    const auto& r = j.at("resources");
    k.resources.registers = r.at("registers");
    k.resources.spill_store_bytes = r.at("spill_store_bytes");
    k.resources.spill_load_bytes = r.at("spill_load_bytes");
    k.resources.smem_static_bytes = r.at("smem_static_bytes");
    k.resources.stack_frame_bytes = r.at("stack_frame_bytes");
    k.resources.cmem_bytes = r.at("cmem_bytes");
    k.resources.code_bytes = cubin_function_bytes(k.cubin, k.lowered_name);  // read off the cubin itself
    k.log = j.value("log", "");
    k.disk_hit = true;
    return k;
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable metadata: recompile and overwrite
  }
}

void store(const CompiledKernel& k) {
  try {
    fs::path dir = entry_dir(k.key);
    fs::create_directories(dir);
    nlohmann::json j;
    j["key"] = k.key;
    j["function"] = k.spec.function;
    j["template_args"] = k.spec.template_args;
    j["config"] = k.spec.config;
    j["options"] = k.options.str();
    j["arch"] = k.arch;
    j["lowered_name"] = k.lowered_name;
    j["compile_ms"] = k.compile_ms;
    j["cubin_sha256"] = sha256_hex(k.cubin);
    j["resources"] = {{"registers", k.resources.registers},
                      {"spill_store_bytes", k.resources.spill_store_bytes},
                      {"spill_load_bytes", k.resources.spill_load_bytes},
                      {"smem_static_bytes", k.resources.smem_static_bytes},
                      {"stack_frame_bytes", k.resources.stack_frame_bytes},
                      {"cmem_bytes", k.resources.cmem_bytes}};
    j["log"] = k.log;
    // The cubin lands first: metadata present implies the cubin is complete.
    write_atomic(dir / (k.key + ".cubin"), k.cubin);
    write_atomic(dir / (k.key + ".json"), j.dump(2));
  } catch (const std::exception& e) {
    std::cerr << "tilecraft jit: warning: could not write cache entry " << k.key << ": " << e.what() << "\n";
  }
}

}  // namespace tilecraft::jit::disk
