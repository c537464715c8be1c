// JIT: cache keys, NVRTC compilation without a GPU, the disk cache and its
// safety under concurrent processes.
#include <gtest/gtest.h>

#include <iostream>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <deque>
#include <fstream>
#include <set>

#include "test_util.h"
#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/embedded_sources.h"
#include "tilecraft/jit/hash.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/harness/precompile.h"
#include "tilecraft/harness/runner.h"

using namespace tilecraft;
using namespace tilecraft::jit;
namespace fs = std::filesystem;

namespace {
KernelSpec fill_spec(const std::string& type = "float") {
  return {"harness/random.cuh", "tc::harness::fill_uniform_kernel", {type}, "fill " + type};
}

// Points the disk cache at a fresh directory for one test.
struct ScopedCacheDir {
  std::string dir;
  explicit ScopedCacheDir(const std::string& name) : dir(test::temp_dir(name)) {
    setenv("TILECRAFT_CACHE_DIR", dir.c_str(), 1);
    unsetenv("TILECRAFT_DISABLE_CACHE");
    clear_memory_cache();
  }
  ~ScopedCacheDir() {
    unsetenv("TILECRAFT_CACHE_DIR");
    clear_memory_cache();
  }
  std::vector<fs::path> files() const {
    std::vector<fs::path> out;
    for (auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
    return out;
  }
};
}  // namespace

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string million(1000000, 'a');
  EXPECT_EQ(sha256_hex(million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// The SHA-extensions path (where this CPU has it) and the portable one give
// the same state on random blocks, and the streaming update the same digest
// however the input is cut (buffered tails, whole blocks straight through).
TEST(Sha256, BothPathsAndAnyCutAgree) {
  std::string data(64 * 40 + 37, '\0');
  uint64_t z = 5203;  // fixed seed, recorded here
  for (char& c : data) c = char((z = z * 6364136223846793005ull + 1442695040888963407ull) >> 56);
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  if (detail::sha256_accelerated()) {
    uint32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    detail::sha256_blocks(a, bytes, 40, true);
    detail::sha256_blocks(b, bytes, 40, false);
    EXPECT_EQ(std::vector<uint32_t>(a, a + 8), std::vector<uint32_t>(b, b + 8));
  } else {
    std::cout << "(no SHA extensions on this CPU: the portable path only)\n";
  }
  const std::string whole = sha256_hex(data);
  for (size_t cut : {size_t(1), size_t(63), size_t(64), size_t(65), size_t(1000), data.size() - 1}) {
    Sha256 h;
    h.update(std::string_view(data).substr(0, cut)).update(std::string_view(data).substr(cut));
    EXPECT_EQ(h.hex(), whole) << "cut at " << cut;
  }
}

TEST(JitKey, SameInputsSameKey) {
  EXPECT_EQ(cache_key(fill_spec(), {}, "sm_90a"), cache_key(fill_spec(), {}, "sm_90a"));
}

TEST(JitKey, EveryIngredientChangesTheKey) {
  const std::string base = cache_key(fill_spec(), {}, "sm_90a");
  EXPECT_NE(base, cache_key(fill_spec("tc::bf16"), {}, "sm_90a"));                   // template argument
  EXPECT_NE(base, cache_key(fill_spec(), CompileOptions::parse("profile"), "sm_90a"));  // option set
  EXPECT_NE(base, cache_key(fill_spec(), CompileOptions::parse("release,maxrregcount=64"), "sm_90a"));
  EXPECT_NE(base, cache_key(fill_spec(), CompileOptions::parse("release,fast-math"), "sm_90a"));
  EXPECT_NE(base, cache_key(fill_spec(), {}, "sm_80"));                                // arch
  KernelSpec other = fill_spec();
  other.function = "tc::harness::other";
  EXPECT_NE(base, cache_key(other, {}, "sm_90a"));                                     // kernel name
}

// A copy of the kernel tree with `edited` changed (a comment appended).
std::string kernel_tree_with_edit(const std::string& name, const std::string& edited) {
  std::string dir = test::temp_dir(name);
  for (const auto& s : embedded_sources()) {
    fs::path p = fs::path(dir) / s.path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << s.text << (s.path == edited ? "\n// edited\n" : "");
  }
  return dir;
}

TEST(JitKey, ChangedIncludedHeaderChangesTheKey) {
  const std::string base = cache_key(fill_spec(), {}, "sm_90a");
  set_kernel_dir(kernel_tree_with_edit("kernels_copy", "tile/types.cuh"));  // included by the kernel
  const std::string edited = cache_key(fill_spec(), {}, "sm_90a");
  set_kernel_dir("");
  EXPECT_EQ(base, cache_key(fill_spec(), {}, "sm_90a"));
  EXPECT_NE(base, edited);
  // A header the kernel does not include leaves the key alone.
  set_kernel_dir(kernel_tree_with_edit("kernels_copy2", "moe/reduce_fused.cuh"));
  EXPECT_EQ(base, cache_key(fill_spec(), {}, "sm_90a"));
  set_kernel_dir("");
}

// The kernel-sources fingerprint (tilecraft env's kernel_sources_sha256):
// the same for an identical copy of the tree, different for an edited
// one, and the embedded headers' again once the directory is unset.
TEST(JitKey, KernelSourcesFingerprintFollowsTheTexts) {
  const std::string embedded = kernel_sources_sha256();
  EXPECT_EQ(embedded.size(), 64u);
  set_kernel_dir(kernel_tree_with_edit("kernels_same", ""));
  EXPECT_EQ(kernel_sources_sha256(), embedded) << "an identical copy";
  set_kernel_dir(kernel_tree_with_edit("kernels_edited", "moe/reduce_fused.cuh"));
  const std::string edited = kernel_sources_sha256();
  set_kernel_dir("");
  EXPECT_NE(edited, embedded);
  EXPECT_EQ(kernel_sources_sha256(), embedded);
}

// A kernel directory in the compile options (bench --vs-kernels): the key
// follows that tree's texts without touching the process's headers; an
// identical copy keys as the embedded headers do; NVRTC compiles that tree
// (a header made to fail fails only there); parameter headers that differ
// are named.
TEST(JitKey, KernelDirInTheOptions) {
  const std::string base = cache_key(fill_spec(), {}, "sm_90a");
  CompileOptions same, edited, broken;
  same.kernel_dir = kernel_tree_with_edit("kernels_opt_same", "");
  edited.kernel_dir = kernel_tree_with_edit("kernels_opt_edited", "tile/types.cuh");
  EXPECT_EQ(cache_key(fill_spec(), same, "sm_90a"), base) << "an identical copy";
  EXPECT_NE(cache_key(fill_spec(), edited, "sm_90a"), base);
  EXPECT_EQ(cache_key(fill_spec(), {}, "sm_90a"), base) << "the process's headers untouched";
  EXPECT_EQ(kernel_sources_sha256(same.kernel_dir), kernel_sources_sha256());
  EXPECT_NE(kernel_sources_sha256(edited.kernel_dir), kernel_sources_sha256());
  EXPECT_TRUE(params_headers_differing(same.kernel_dir).empty());
  EXPECT_TRUE(params_headers_differing(edited.kernel_dir).empty()) << "tile/types.cuh is no parameter header";
  const std::string params_edited = kernel_tree_with_edit("kernels_opt_params", "moe/grouped_gemm_params.cuh");
  EXPECT_EQ(params_headers_differing(params_edited), std::vector<std::string>{"moe/grouped_gemm_params.cuh"});
  // NVRTC reads the directory's texts: a copy whose kernel header stops the
  // build fails there, the embedded tree still builds.
  broken.kernel_dir = test::temp_dir("kernels_opt_broken");
  for (const auto& s : embedded_sources()) {
    fs::path p = fs::path(broken.kernel_dir) / s.path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << s.text << (std::string(s.path) == "harness/random.cuh" ? "\n#error the other tree\n" : "");
  }
  ScopedCacheDir cache("jit_kernel_dir_cache");
  try {
    compile(fill_spec(), broken, "sm_90a");
    ADD_FAILURE() << "compiled a tree whose header has #error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the other tree"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(compile(fill_spec(), {}, "sm_90a"));
}

TEST(JitOptions, ParseAndErrors) {
  CompileOptions o = CompileOptions::parse("debug,maxrregcount=96,ftz=1,fmad=0");
  EXPECT_EQ(o.set, "debug");
  EXPECT_EQ(o.max_registers, 96);
  EXPECT_EQ(CompileOptions::parse(o.str()).str(), o.str());
  auto flags = o.flags();
  EXPECT_NE(std::find(flags.begin(), flags.end(), "-G"), flags.end());
  EXPECT_NE(std::find(flags.begin(), flags.end(), "-fmad=false"), flags.end());
  TC_EXPECT_ERROR(CompileOptions::parse("fastest"), ErrorKind::kInvalidArgument, "set", "fastest");
  TC_EXPECT_ERROR(CompileOptions::parse("release,maxrregcount=x"), ErrorKind::kInvalidArgument, "maxrregcount");
  TC_EXPECT_ERROR(CompileOptions::parse("release,unroll=4"), ErrorKind::kInvalidArgument, "unroll");
  // The whole value is the number (stoi alone took "64x" as 64), in range.
  TC_EXPECT_ERROR(CompileOptions::parse("release,maxrregcount=64x"), ErrorKind::kInvalidArgument, "maxrregcount",
                  "0..255", "'64x'");
  TC_EXPECT_ERROR(CompileOptions::parse("release,maxrregcount=99999999999"), ErrorKind::kInvalidArgument,
                  "maxrregcount", "0..255");
  TC_EXPECT_ERROR(CompileOptions::parse("release,maxrregcount=-1"), ErrorKind::kInvalidArgument, "maxrregcount");
  EXPECT_EQ(CompileOptions::parse("release,maxrregcount=0").max_registers, 0);
  // An option given twice with two values would take the last silently
  // (the same value twice is harmless); the set comes first.
  TC_EXPECT_ERROR(CompileOptions::parse("release,ftz=1,ftz=0"), ErrorKind::kInvalidArgument, "ftz", "one value (1)",
                  "'0'");
  TC_EXPECT_ERROR(CompileOptions::parse("release,maxrregcount=64,max-registers=32"), ErrorKind::kInvalidArgument,
                  "max-registers", "one value (64)");
  EXPECT_TRUE(CompileOptions::parse("debug,trace,trace").trace);
  TC_EXPECT_ERROR(CompileOptions::parse("fast-math,release"), ErrorKind::kInvalidArgument, "set", "first",
                  "'release' after options");
  TC_EXPECT_ERROR(CompileOptions::parse("release,debug"), ErrorKind::kInvalidArgument, "set", "first");
  EXPECT_TRUE(CompileOptions::parse("trace").trace);  // the set left out: release
  EXPECT_EQ(CompileOptions::parse("trace").set, "release");
  // trace: its own flag, text and cache key; off by default and then absent from the text.
  const CompileOptions traced = CompileOptions::parse("release,trace");
  EXPECT_TRUE(traced.trace);
  EXPECT_FALSE(CompileOptions::parse("release").trace);
  EXPECT_FALSE(CompileOptions::parse("release,trace=0").trace);
  EXPECT_EQ(traced.str(), "release,trace");
  EXPECT_EQ(CompileOptions::parse(traced.str()), traced);
  EXPECT_EQ(CompileOptions{}.str(), "release");
  const auto tf = traced.flags();
  EXPECT_NE(std::find(tf.begin(), tf.end(), "-DTC_TRACE"), tf.end());
  const auto rf = CompileOptions{}.flags();
  EXPECT_EQ(std::find(rf.begin(), rf.end(), "-DTC_TRACE"), rf.end());
  EXPECT_NE(cache_key(fill_spec(), traced, "sm_90a"), cache_key(fill_spec(), CompileOptions{}, "sm_90a"));
  TC_EXPECT_ERROR(CompileOptions::parse("release,trace=2"), ErrorKind::kInvalidArgument, "trace", "'2'");
  // kernels=DIR: a text form (so parse(str()) holds), no NVRTC flag.
  const CompileOptions other = CompileOptions::parse("release,kernels=/tmp/k");
  EXPECT_EQ(other.kernel_dir, "/tmp/k");
  EXPECT_EQ(other.str(), "release,kernels=/tmp/k");
  EXPECT_EQ(CompileOptions::parse(other.str()), other);
  EXPECT_EQ(other.flags(), CompileOptions{}.flags());
  TC_EXPECT_ERROR(CompileOptions::parse("release,kernels="), ErrorKind::kInvalidArgument, "kernels", "directory");
}

TEST(JitCompile, ParsesPtxasResourceLines) {
  const std::string log =
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 560 bytes cmem[0]\n";
  const Resources r = parse_ptxas_resources(log);
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.smem_static_bytes, 1024);
  EXPECT_EQ(r.cmem_bytes, 560);
  EXPECT_EQ(r.stack_frame_bytes, 24);
  EXPECT_EQ(r.spill_store_bytes, 8);
  EXPECT_EQ(r.spill_load_bytes, 12);
  EXPECT_EQ(parse_ptxas_resources("no resource lines").registers, -1);
}

TEST(JitCompile, ArchNamesAreChecked) {
  for (const char* ok : {"sm_90a", "sm_80", "compute_90", "sm_100f", "sm_120a"}) EXPECT_NO_THROW(check_arch(ok)) << ok;
  for (const char* bad : {"", "sm_9", "sm_1000", "sm_90b", "sm90", "compute_", "sm_90aa", "gfx90a"})
    EXPECT_THROW(check_arch(bad), Error) << bad;
  // Well formed, but no compute capability NVRTC compiles for: named as the arch.
  TC_EXPECT_ERROR(check_arch("sm_12a"), ErrorKind::kInvalidArgument, "argument 'arch'", "NVRTC", "'sm_12a'");
  // The compute capability whose kernels `compile --arch` lists.
  EXPECT_EQ(arch_cc_major("sm_90a"), 9);
  EXPECT_EQ(arch_cc_major("sm_80"), 8);
  EXPECT_EQ(arch_cc_major("compute_90"), 9);
  EXPECT_EQ(arch_cc_major("sm_100f"), 10);
  EXPECT_EQ(arch_cc_major("sm_120a"), 12);
  EXPECT_THROW(arch_cc_major("sm_9"), Error);
}

TEST(JitCompile, NvrtcBuildsCubinAndReportsResourcesWithoutGpu) {
  setenv("TILECRAFT_DISABLE_CACHE", "1", 1);
  clear_memory_cache();
  auto k = compile(fill_spec("tc::bf16"), {}, "sm_90a");
  unsetenv("TILECRAFT_DISABLE_CACHE");
  EXPECT_GT(k->cubin.size(), 100u);
  EXPECT_EQ(k->cubin.substr(1, 3), "ELF");
  EXPECT_GT(k->resources.registers, 0);
  EXPECT_FALSE(k->lowered_name.empty());
  EXPECT_GT(k->compile_ms, 0);
  // The entry's SASS: whole 16-byte instructions, a part of the cubin.
  EXPECT_GT(k->resources.code_bytes, 0);
  EXPECT_EQ(k->resources.code_bytes % 16, 0);
  EXPECT_LT(size_t(k->resources.code_bytes), k->cubin.size());
  EXPECT_EQ(cubin_function_bytes(k->cubin, k->lowered_name), k->resources.code_bytes);
  auto ptx = nvrtc_compile(fill_spec("tc::bf16"), {}, "compute_90a");
  EXPECT_NE(ptx.binary.find(".target sm_90a"), std::string::npos);
  EXPECT_EQ(ptx.resources.code_bytes, 0);
}

// The section lookup reads only inside the buffer: an unknown function,
// a truncated cubin at every length, or bytes that are not ELF give 0.
TEST(JitCompile, CodeSizeOfMalformedCubinsIsZero) {
  auto k = compile(fill_spec("tc::bf16"), {}, "sm_90a");
  EXPECT_EQ(cubin_function_bytes(k->cubin, "no_such_function"), 0);
  EXPECT_EQ(cubin_function_bytes("", k->lowered_name), 0);
  EXPECT_EQ(cubin_function_bytes(std::string(64, '\x7f'), k->lowered_name), 0);
  for (size_t n = 0; n < k->cubin.size(); n += 97)
    EXPECT_LE(cubin_function_bytes(k->cubin.substr(0, n), k->lowered_name), k->resources.code_bytes) << n;
  std::string scrambled = k->cubin;
  for (size_t i = 0x28; i < 0x40; ++i) scrambled[i] = '\xff';  // section table offsets past the end
  EXPECT_EQ(cubin_function_bytes(scrambled, k->lowered_name), 0);
}

TEST(JitCompile, ErrorsNameTheKernel) {
  KernelSpec bad{"harness/random.cuh", "tc::harness::fill_uniform_kernel", {"no_such_type"}, "bad"};
  TC_EXPECT_ERROR(compile(bad, {}, "sm_90a"), ErrorKind::kCuda, "fill_uniform_kernel<no_such_type>");
  TC_EXPECT_ERROR(compile(fill_spec(), {}, "sm_9x"), ErrorKind::kInvalidArgument, "arch", "sm_9x");
}

TEST(JitCache, DiskHitAfterMemoryCleared) {
  ScopedCacheDir cache("cache_hit");
  auto first = compile(fill_spec("tc::fp16"), {}, "sm_90a");
  EXPECT_FALSE(first->disk_hit);
  clear_memory_cache();
  auto second = compile(fill_spec("tc::fp16"), {}, "sm_90a");
  EXPECT_TRUE(second->disk_hit);
  EXPECT_EQ(first->key, second->key);
  EXPECT_EQ(first->cubin, second->cubin);
  EXPECT_EQ(first->resources.registers, second->resources.registers);
  EXPECT_EQ(cache.files().size(), 2u);  // cubin + metadata
}

TEST(JitCache, CorruptEntryIsRecompiled) {
  ScopedCacheDir cache("cache_corrupt");
  auto first = compile(fill_spec(), {}, "sm_90a");
  for (auto& f : cache.files())
    if (f.extension() == ".cubin") std::ofstream(f, std::ios::trunc) << "garbage";
  clear_memory_cache();
  auto again = compile(fill_spec(), {}, "sm_90a");
  EXPECT_FALSE(again->disk_hit);
  EXPECT_EQ(again->cubin, first->cubin);
}

TEST(JitCache, ConcurrentProcessesLeaveOneValidEntry) {
  ScopedCacheDir cache("cache_concurrent");
  std::vector<pid_t> kids;
  for (int i = 0; i < 4; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        auto k = compile(fill_spec("tc::fp8_e4m3"), {}, "sm_90a");
        rc = k->cubin.size() > 100 ? 0 : 1;
      } catch (...) {
        rc = 2;
      }
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed with status " << status;
  }
  auto files = cache.files();
  ASSERT_EQ(files.size(), 2u) << "expected exactly one cubin and one metadata file, no temp files";
  clear_memory_cache();
  auto k = compile(fill_spec("tc::fp8_e4m3"), {}, "sm_90a");
  EXPECT_TRUE(k->disk_hit);
}

// Precompiling a selection: each distinct kernel compiled once (no errors),
// then served from memory to the case that launches it.
TEST(JitPrecompile, CompilesEachDistinctKernelOnceForTheCases) {
  ScopedCacheDir cache("jit-precompile");
  auto m = harness::Manifest::load();
  std::deque<harness::WorkloadSpec> storage;
  harness::Selection s;
  s.op = "moe_grouped_gemm";
  s.workload = "prefill-kn-tails";
  const auto cases = harness::select_cases(m, s, storage);
  ASSERT_EQ(cases.size(), 3u);
  const auto items = harness::precompile(cases, {}, "sm_90a", 2);
  ASSERT_FALSE(items.empty());
  std::set<std::string> names;
  for (auto& it : items) {
    EXPECT_TRUE(it.kernel) << it.spec.name_expression() << ": " << it.error;
    EXPECT_TRUE(names.insert(it.spec.name_expression()).second) << "compiled twice: " << it.spec.name_expression();
    if (it.kernel) {
      EXPECT_EQ(compile(it.spec, {}, "sm_90a").get(), it.kernel.get());  // a memory hit
    }
  }
  harness::RunOptions bad;
  bad.config = {{"sm90", 7}};
  EXPECT_TRUE(harness::precompile(cases, bad, "sm_90a", 2).empty());  // refused configs: reported when run
  std::vector<harness::RefusedCase> refused;
  EXPECT_TRUE(harness::precompile(cases, bad, "sm_90a", 2, &refused).empty());
  ASSERT_EQ(refused.size(), cases.size());  // each case once, not once per mode
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(refused[i].case_id, cases[i].id());
    EXPECT_EQ(refused[i].op, "moe_grouped_gemm");
    EXPECT_NE(refused[i].error.find("sm90"), std::string::npos) << refused[i].error;
    EXPECT_NE(refused[i].error.find("7"), std::string::npos) << refused[i].error;
  }
}
