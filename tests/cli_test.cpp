// The tilecraft command as a user runs it: exit codes and messages.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "tilecraft/jit/embedded_sources.h"
#include "tilecraft/runtime/driver.h"

namespace {
tilecraft::test::CommandResult run(const std::string& args, const std::string& env = "") {
  return tilecraft::test::run_tilecraft(args, env);
}
// A copy of this build's kernel headers in a new temp dir named `name`; with
// `edit_params`, moe/reduce_fused_params.cuh gains a line (a parameter
// header that differs).
std::string kernel_tree_copy(const std::string& name, bool edit_params) {
  namespace fs = std::filesystem;
  const std::string dir = tilecraft::test::temp_dir(name);
  for (const auto& s : tilecraft::jit::embedded_sources()) {
    const fs::path p = fs::path(dir) / s.path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << s.text << (edit_params && std::string(s.path) == "moe/reduce_fused_params.cuh" ? "\n" : "");
  }
  return dir;
}
}  // namespace

TEST(Cli, UsageErrorsExit2NamingTheFlag) {
  auto r = run("test --no-such-flag");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("no-such-flag"), std::string::npos) << r.out;
  r = run("test --op moe_reduce_fused --shape 'T=4,K=2,Z=3,H=8,dtype=bf16' --backend cpu");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("'Z'"), std::string::npos) << r.out;
  r = run("test --op no_such_op --backend cpu");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--op"), std::string::npos) << r.out;
  r = run("bench --repeat 0");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--repeat: expected an integer from 1 to 100000, got '0'"), std::string::npos) << r.out;
  r = run("bench --trials 2.5");  // refused by our bounds' wording, not CLI11's conversion message
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--trials: expected an integer from 1 to 1000, got '2.5'"), std::string::npos) << r.out;
  r = run("bench --warmup-ms -1");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--warmup-ms: expected a number from 0 to 60000, got '-1'"), std::string::npos) << r.out;
  r = run("bench --energy-ms 500");  // under the energy counter's second
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("'--energy-ms'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at least 1000"), std::string::npos) << r.out;
  r = run("bench --energy-ms -5");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--energy-ms"), std::string::npos) << r.out;
  r = run("bench --op moe_reduce_fused --backend cpu --energy-ms 1000");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("the cuda backend"), std::string::npos) << r.out;
  r = run("bench --vs-config stagger");  // no value
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("'--vs-config'"), std::string::npos) << r.out;
  r = run("bench --op moe_reduce_fused --backend cpu --vs-config vec=4");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--vs-config"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the cuda backend"), std::string::npos) << r.out;
  // Each --vs-config value is one A/B side: a key twice within one is an
  // error, two values are two sides (parsed, then refused on the cpu
  // backend); --vs-kernels gives one directory or one per side.
  r = run("bench --op moe_reduce_fused --backend cpu --vs-config vec=4,vec=2");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("vec=4 and vec=2"), std::string::npos) << r.out;
  r = run("bench --op moe_reduce_fused --backend cpu --vs-config vec=4 vec=2");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(r.out.find("vec=4 and vec=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the cuda backend"), std::string::npos) << r.out;
  r = run("bench --op moe_reduce_fused --backend cpu --vs-config vec=4 vec=2 vec=1 --vs-kernels /tmp /tmp");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("'--vs-kernels'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("or 3 (one per --vs-config side"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 directories"), std::string::npos) << r.out;
  r = run("bench --vs-kernels /no/such/kernel/dir");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("'--vs-kernels'"), std::string::npos) << r.out;
  r = run("bench --op moe_reduce_fused --backend cpu --vs-kernels /tmp");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--vs-kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the cuda backend"), std::string::npos) << r.out;
  r = run("compile --options fastest");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("fastest"), std::string::npos) << r.out;
  // A value the manifest reader cannot take is quoted back.
  r = run("test --op moe_reduce_fused --shape 'T=99999999999999999999,K=2,H=8' --backend cpu");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("T: expected an integer, got '99999999999999999999'"), std::string::npos) << r.out;
  r = run("compile --arch sm_9");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("compile: argument '--arch'"), std::string::npos) << r.out;
  for (const char* sub : {"inspect --op moe_reduce_fused --workload tiny --dump ptx", "run --op moe_reduce_fused"}) {
    r = run(std::string(sub) + " --arch sm_1");  // before any work (run: before its results tree)
    EXPECT_EQ(r.rc, 2) << sub << ": " << r.out;
    EXPECT_NE(r.out.find(": argument '--arch'"), std::string::npos) << sub << ": " << r.out;
  }
  // An --out that cannot be made: a usage error before any work (it was an
  // "internal error" once the first op's compiles were done).
  r = run("run --op moe_reduce_fused --out /proc/tilecraft_cannot_make_this");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("run: argument '--out'"), std::string::npos) << r.out;
  // --config: KEY=INTEGER lists; trailing text after the integer is refused.
  for (const char* bad : {"sm90=2x", "sm90=2,tma", "=3", "sm90=", "sm90=1,,tma=0"}) {
    r = run(std::string("inspect --op moe_grouped_gemm --workload prefill-nk --variant Plain --dump ptx --config '") + bad + "'");
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--config"), std::string::npos) << r.out;
  }
  // Values merge into one set; a key twice with different values is refused
  // (the same value twice is harmless).
  r =
      run("inspect --op moe_grouped_gemm --workload prefill-nk --variant Plain --dump ptx --config stages=3 "
          "stages=4");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("stages=3 and stages=4"), std::string::npos) << r.out;
  r =
      run("inspect --op moe_grouped_gemm --workload prefill-nk --variant Plain --dump ptx --config stages=3,sm90=2 "
          "stages=3");
  EXPECT_EQ(r.rc, 0) << r.out;
}

// bench --scopes: only the named scopes are timed (the main line always
// runs; "main" names it); a name the case does not have is its error,
// listing those it has.
TEST(Cli, BenchScopesFilter) {
  TC_REQUIRE_GPU();
  auto r = run("bench --op fused_moe --workload t1-k1 --warmup 0 --repeat 2 --scopes experts,gate_up");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("    experts "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    gate_up "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cublas_per_expert "), std::string::npos) << r.out;
  r = run("bench --op fused_moe --workload t1-k1 --warmup 0 --repeat 2 --scopes main --options release,trace");
  EXPECT_EQ(r.rc, 0) << r.out;  // the main line alone, its stamps after a flushed re-run
  EXPECT_EQ(r.out.find("    experts "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trace "), std::string::npos) << r.out;
  r = run("bench --op fused_moe --workload t1-k1 --warmup 0 --repeat 2 --scopes expertz");
  EXPECT_NE(r.out.find("--scopes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'expertz'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("main, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernel_only"), std::string::npos) << r.out;
}

// bench --energy-ms: each timed scope, and the main line, gets a line of
// energy per call run alone (or says why it has none: no NVML counter).
TEST(Cli, BenchEnergyPerScope) {
  TC_REQUIRE_GPU();
  auto r = run("bench --op fused_moe --workload t1-k1 --warmup 0 --repeat 2 --scopes experts --energy-ms 1000");
  EXPECT_EQ(r.rc, 0) << r.out;
  for (const char* name : {"    energy main ", "    energy experts "}) {
    const size_t at = r.out.find(name);
    ASSERT_NE(at, std::string::npos) << name << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_TRUE(line.find(" J/call alone (") != std::string::npos ||
                line.find("energy unavailable: ") != std::string::npos)
        << line;
  }
}

// bench --vs-config: the case's lines under the other overrides, timed in
// the same rounds (NAME@vs, each judged against NAME) and verified; an
// override the op does not know fails the case naming it.
TEST(Cli, BenchVsConfig) {
  TC_REQUIRE_GPU();
  auto r = run("bench --op moe_reduce_fused --workload tiny --warmup 0 --repeat 3 --config vec=8 --vs-config vec=4");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("    vs: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vec=4"), std::string::npos) << r.out;
  const size_t at = r.out.find("    main@vs ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(line.find("x main  ("), std::string::npos) << line;
  EXPECT_EQ(r.out.find("WRONG RESULT"), std::string::npos) << r.out;
  // Two sides: lines NAME@vs1 and NAME@vs2, each side named and verified.
  r = run("bench --op moe_reduce_fused --workload tiny --warmup 0 --repeat 3 --config vec=8 --vs-config vec=4 vec=2");
  EXPECT_EQ(r.rc, 0) << r.out;
  for (const char* side : {"1", "2"}) {
    EXPECT_NE(r.out.find(std::string("    vs") + side + ": "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::string("    main@vs") + side + " "), std::string::npos) << r.out;
  }
  EXPECT_EQ(r.out.find("    main@vs "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("WRONG RESULT"), std::string::npos) << r.out;
  r = run("bench --op moe_reduce_fused --workload tiny --warmup 0 --repeat 3 --vs-config vec=4 no_such_key=1");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("A/B side @vs2 (no_such_key=1): "), std::string::npos) << r.out;  // names the side
}

// --options kernels=DIR: another tree's kernel headers, compiled (here a
// copy of this build's); refused where the directory is missing or its
// parameter headers differ from this build's.
TEST(Cli, CompileOptionsKernelDir) {
  const std::string same = kernel_tree_copy("opt_kernels_same", false),
                    params = kernel_tree_copy("opt_kernels_params", true);
  const std::string cache = "TILECRAFT_CACHE_DIR=" + tilecraft::test::temp_dir("opt_kernels_cache");
  auto r = run("compile --op moe_reduce_fused --workload tiny --options release,kernels=" + same, cache);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("(0 errors)"), std::string::npos) << r.out;
  r = run("compile --op moe_reduce_fused --workload tiny --options release,kernels=/no/such/kernel/dir", cache);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("'--options'"), std::string::npos) << r.out;
  r = run("compile --op moe_reduce_fused --workload tiny --options release,kernels=" + params, cache);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("moe/reduce_fused_params.cuh"), std::string::npos) << r.out;
}

// bench --vs-kernels: the second run compiles another directory's kernel
// headers (here a copy of this build's) and is timed and verified beside
// the first; a directory whose parameter headers differ is refused.
TEST(Cli, BenchVsKernels) {
  TC_REQUIRE_GPU();
  const std::string same = kernel_tree_copy("vs_kernels_same", false),
                    params = kernel_tree_copy("vs_kernels_params", true);
  auto r = run("bench --op moe_reduce_fused --workload tiny --warmup 0 --repeat 3 --vs-kernels " + same);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("    vs: kernels of " + same), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    main@vs "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("WRONG RESULT"), std::string::npos) << r.out;
  r = run("bench --op moe_reduce_fused --workload tiny --warmup 0 --repeat 3 --vs-kernels " + params);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("moe/reduce_fused_params.cuh"), std::string::npos) << r.out;
}

// TILECRAFT_KERNEL_DIR swaps in another tree's kernel headers for the whole
// process: a copy of this build's compiles; a tree whose parameter headers
// differ (kernels that would read the host's launch structs at other
// offsets) is refused, naming the variable and the header.
TEST(Cli, KernelDirEnvChecksParameterHeaders) {
  const std::string same = kernel_tree_copy("env_kernels_same", false),
                    params = kernel_tree_copy("env_kernels_params", true);
  auto r = run("compile --op moe_reduce_fused --workload tiny", "TILECRAFT_KERNEL_DIR=" + same);
  EXPECT_EQ(r.rc, 0) << r.out;
  r = run("compile --op moe_reduce_fused --workload tiny", "TILECRAFT_KERNEL_DIR=" + params);
  EXPECT_EQ(r.rc, 1) << r.out;  // (compile names each kernel's error, then exits 1)
  EXPECT_EQ(r.out.find("(0 errors)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TILECRAFT_KERNEL_DIR"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("moe/reduce_fused_params.cuh"), std::string::npos) << r.out;
}

TEST(Cli, MissingGpuExits3) {
  // An empty CUDA_VISIBLE_DEVICES hides every GPU, so this runs on GPU machines too.
  auto r = run("test --backend cuda --workload tiny", "CUDA_VISIBLE_DEVICES=");
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.out.find("no CUDA device"), std::string::npos) << r.out;
}

// Where no GPU is usable and no backend was named, the CPU backend stands in
// and refuses model-sized cases at once (exit 2, naming the case, its flops
// and --backend cpu) instead of running them for hours; small ones run.
TEST(Cli, CpuStandInRefusesModelSizedCases) {
  auto r = run("test --op fused_moe --workload race-performance-2", "CUDA_VISIBLE_DEVICES=");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("REFUSED fused_moe/Default/race-performance-2 [cpu]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("too much for the CPU backend standing in for a missing GPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--backend cpu runs it anyway"), std::string::npos) << r.out;
  r = run("test --op fused_moe --workload race-like-small", "CUDA_VISIBLE_DEVICES=");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("1 passed, 0 failed"), std::string::npos) << r.out;
}

// --device names a GPU: refused beside --backend cpu, below 0, past the GPUs
// this process sees, and where there is no GPU at all (exit 3).
TEST(Cli, DeviceFlagIsChecked) {
  auto r = run("test --op moe_reduce_fused --backend cpu --device 0");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("'--device'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--backend cpu"), std::string::npos) << r.out;
  r = run("bench --device -1");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--device: expected an integer from 0 to 65535, got '-1'"), std::string::npos) << r.out;
  r = run("test --op moe_reduce_fused --device 0", "CUDA_VISIBLE_DEVICES=");
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.out.find("test: argument '--device'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no GPU is usable"), std::string::npos) << r.out;
  r = run("env --device 64");  // more GPUs than any machine here has
  if (tilecraft::rt::driver_available()) {
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find("env: argument '--device': expected a CUDA device ordinal from 0 to"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("got 64"), std::string::npos) << r.out;
    r = run("env --device 0");  // the GPU by its PCI address too (how NVML and nvidia-smi name it)
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("pci_bus_id"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("gpus_visible"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"0: "), std::string::npos) << r.out;  // the list of GPUs by ordinal
  } else {
    EXPECT_EQ(r.rc, 3) << r.out;
    EXPECT_NE(r.out.find("env: argument '--device'"), std::string::npos) << r.out;
  }
}

// SASS needs a disassembler; without one on the search path inspect says so
// and exits 4 (a tool the machine lacks), not 1 (a failure found).
TEST(Cli, InspectSassWithoutADisassembler) {
  const auto r = run("inspect --op moe_reduce_fused --workload tiny --dump sass",
                     "PATH=/usr/bin:/bin CUDA_HOME=/nonexistent-cuda-home");
  if (std::filesystem::exists("/usr/local/cuda/bin/cuobjdump") || std::filesystem::exists("/usr/bin/cuobjdump") ||
      std::filesystem::exists("/usr/local/cuda/bin/nvdisasm") || std::filesystem::exists("/usr/bin/nvdisasm")) {
    EXPECT_EQ(r.rc, 0) << r.out;  // found where it is always looked for
  } else {
    EXPECT_EQ(r.rc, 4) << r.out;
    EXPECT_NE(r.out.find("inspect: argument '--dump': expected a disassembler for 'sass'"), std::string::npos)
        << r.out;
  }
}

TEST(Cli, TestAdHocShapeOnCpu) {
  auto r = run("test --op moe_reduce_fused --shape 'T=19,K=3,H=72,dtype=fp16,experts=8' --backend cpu");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("8 passed, 0 failed"), std::string::npos) << r.out;
}

namespace {
// An ad-hoc shape of `op` refused with exit 2, the output naming `want` and
// the `marks` each form of refusal prints.
struct Refusal {
  const char* op;
  const char* shape;
  const char* want;
};
void expect_refused(const Refusal& c, std::initializer_list<std::string> marks) {
  auto r = run(std::string("test --op ") + c.op + " --shape '" + c.shape + "' --backend cpu");
  EXPECT_EQ(r.rc, 2) << c.shape << ": " << r.out;
  EXPECT_NE(r.out.find(c.want), std::string::npos) << c.shape << ": " << r.out;
  for (const std::string& m : marks) EXPECT_NE(r.out.find(m), std::string::npos) << c.shape << ": " << r.out;
}
}  // namespace

// Ad-hoc shapes the routing cannot take are refused before generation (exit
// 2, as any workload that cannot exist) with a message naming the op, the
// workload and the argument, not a crash (E = 0 once read past the end of an
// empty score row) nor a failed case.
TEST(Cli, DegenerateRoutingShapesFailCleanly) {
  for (const Refusal& c :
       {Refusal{"moe_topk_gate", "T=3,K=2,E=0,dtype=fp32", "argument 'E'"},
        Refusal{"fused_moe", "T=3,K=2,H=64,I=32,E=0,dtype=bf16", "argument 'E'"},
        Refusal{"moe_topk_gate", "T=3,K=20,E=16,dtype=fp32", "argument 'K'"},
        Refusal{"moe_topk_gate", "T=3,K=2,E=10,n_group=3,topk_group=1,mode=sigmoid_grouped_topk,dtype=fp32",
                "argument 'n_group'"},
        Refusal{"fused_moe", "T=3,K=9,H=64,I=32,E=8,dtype=bf16", "argument 'K'"},
        Refusal{"fused_moe", "T=3,K=6,H=64,I=32,E=16,n_group=4,topk_group=1,mode=sigmoid_grouped_topk,dtype=bf16",
                "argument 'topk_group'"}})
    expect_refused(c, {std::string(c.op) + ": workload 'shape:"});
  // The gate's settings are read strictly: renormalize=yes read as false and
  // scale=2.5x as 2.5, and both cases passed.
  for (const Refusal& c :
       {Refusal{"moe_topk_gate", "T=3,K=2,E=8,renormalize=yes,dtype=fp32", "renormalize 'yes' is not true or false"},
        Refusal{"fused_moe", "T=3,K=2,H=64,I=32,E=8,renormalize=1,dtype=bf16", "renormalize '1' is not true or false"},
        Refusal{"moe_topk_gate", "T=3,K=2,E=8,scale=nan,dtype=fp32", "scale 'nan' is not a finite number"},
        Refusal{"fused_moe", "T=3,K=2,H=64,I=32,E=8,scale=2.5x,dtype=bf16", "scale '2.5x' is not a finite number"}})
    expect_refused(c, {std::string(c.op) + ": workload 'shape:"});
}

// Shapes an op's own validator refuses at run time (not the routing's, which
// are refused before generation) end as REFUSED cases and exit 2, beside
// cases that pass; the message names op and argument. Failures exit 1.
TEST(Cli, ShapesAnOpRefusesExit2) {
  for (const Refusal& c :
       {Refusal{"moe_grouped_gemm", "T=8,topk=2,E=4,N=0,K=64,dtype=bf16", "moe_grouped_gemm: argument 'out'"},
        Refusal{"moe_grouped_gemm", "T=8,topk=2,E=4,N=32,K=64,block_m=3,dtype=bf16", "argument 'tile_expert'"},
        Refusal{"moe_fused_mapping", "T=8,K=2,E=4,block_m=0", "moe_fused_mapping: argument 'block_m'"},
        Refusal{"fused_moe", "T=3,K=2,H=0,I=32,E=8,dtype=bf16", "fused_moe: argument 'x'"},
        Refusal{"fused_moe", "T=3,K=2,H=64,I=32,E=8,n_group=0,mode=sigmoid_grouped_topk,routing=uniform,dtype=bf16",
                "fused_moe: argument 'n_group'"}})
    expect_refused(c, {" REFUSED ", " refused (an op does not take the shape, argument or config, or the case is too large for where it would run: each line says which)"});
  // Beside a case that passes: still 2, and the good case ran.
  auto r =
      run("test --op fused_moe --shape 'T=3,K=2,H=64,I=32,E=8,dtype=bf16' --shape 'T=3,K=2,H=0,I=32,E=8,dtype=bf16' "
          "--backend cpu");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("1 passed, 0 failed, 1 refused"), std::string::npos) << r.out;
}

// The CPU backend runs no kernel, but a --config value no kernel takes is
// refused there too (resolved as sm_90a would take it with no GPU), naming
// op and key; before, such a run passed on the CPU and failed on a GPU.
// Values the kernels take still pass.
TEST(Cli, ConfigValuesAreCheckedOnTheCpuBackend) {
  for (const char* args : {"test --op moe_grouped_gemm --workload skewed-bm32 --config block_m=3",
                           "bench --op moe_grouped_gemm --workload skewed-bm32 --config block_m=3 --repeat 1",
                           "test --op fused_moe --workload odd-h-i --config gate_up_block_n=7",
                           "test --op moe_reduce_fused --workload tiny --config vec=3"}) {
    auto r = run(std::string(args) + " --backend cpu");
    EXPECT_EQ(r.rc, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("REFUSED"), std::string::npos) << args << ": " << r.out;
    EXPECT_NE(r.out.find("argument '"), std::string::npos) << args << ": " << r.out;
  }
  auto r = run("test --op moe_grouped_gemm --workload skewed-bm32 --config block_m=32 --backend cpu");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("checks its keys and values"), std::string::npos) << r.out;
  r = run("test --op moe_reduce_fused --workload tiny --config vec=4 --backend cpu");
  EXPECT_EQ(r.rc, 0) << r.out;
}

TEST(Cli, ListEnvInspect) {
  auto r = run("list");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("deepseek-v3-decode"), std::string::npos);
  r = run("list --op fused_moe --tag race");  // one op, its race cases
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("race-performance-2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("moe_reduce_fused ("), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("odd-h-i"), std::string::npos) << r.out;
  r = run("list --op nope");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("list: argument '--op': expected one of: "), std::string::npos) << r.out;
  r = run("list --op moe_topk_gate --tag model");  // a tag other ops have
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("argument '--tag'"), std::string::npos) << r.out;
  r = run("env");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("nvrtc_version"), std::string::npos);
  EXPECT_NE(r.out.find("dependent_launch"), std::string::npos) << r.out;
  r = run("inspect --op moe_reduce_fused --workload tiny --dump resources --arch sm_90a");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("registers"), std::string::npos) << r.out;
  r = run("inspect --op moe_reduce_fused --workload tiny --dump ptx --arch sm_90a");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("ld.global.nc"), std::string::npos) << r.out;
}

TEST(Cli, RunWritesTheResultsLayout) {
  namespace fs = std::filesystem;
  std::string dir = tilecraft::test::temp_dir("run_layout");
  auto r = run("run --workload tiny --out " + dir);
  EXPECT_EQ(r.rc, 0) << r.out;
  for (const char* f : {"logs/raw/moe_reduce_fused.log", "logs/json/moe_reduce_fused.jsonl",
                        "logs/csv/moe_reduce_fused.csv", "reports/correctness_report.md",
                        "reports/performance_report.md", "reports/algorithm_design_report.md"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / f)) << f;
  // Timed records say whether programmatic dependent launch was on.
  std::ifstream json(fs::path(dir) / "logs/json/moe_reduce_fused.jsonl");
  const std::string text((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"dependent_launch\""), std::string::npos);
}

// --random N: N seeded random workloads of --op, each named by the --shape
// that repeats it; the same seed draws the same shapes; misuse exits 2
// naming the flag.
// --random-config: the draws carry their overrides in their --shape
// strings; it needs --random, and an op with config keys.
TEST(Cli, TestRandomConfigs) {
  auto r = run("test --op moe_fused_mapping --random 4 --random-config --seed 11 --backend cpu");
  EXPECT_TRUE(r.rc == 0 || r.rc == 2) << r.out;  // 2: some draw's override refused, naming its key
  EXPECT_NE(r.out.find(",config=blocks="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 failed"), std::string::npos) << r.out;
  r = run("test --op moe_fused_mapping --random-config --backend cpu");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--random-config"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--random N"), std::string::npos) << r.out;
  r = run("test --op moe_topk_gate --random 2 --random-config --backend cpu");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("moe_topk_gate"), std::string::npos) << r.out;
}

// compile: a case whose config the op refuses (a --random-config draw's, or
// one in a --shape) is listed as REFUSED naming the key, the other cases'
// kernels still compile, and the exit status is test's (2: refused).
TEST(Cli, CompileListsRefusedCasesAndGoesOn) {
  const std::string shapes = "--op moe_reduce_fused --variant Base --shape 'T=5,K=2,H=64,dtype=bf16' "
                             "--shape 'T=5,K=2,H=64,dtype=bf16,config=vec=3'";
  auto r = run("compile " + shapes);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("REFUSED moe_reduce_fused/Base/shape:T=5,K=2,H=64,dtype=bf16,config=vec=3: "
                       "moe_reduce_fused: argument 'vec'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("got 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bf16->bf16 K=2 vec=8"), std::string::npos) << r.out;  // the other case compiled
  EXPECT_NE(r.out.find("2 kernels for sm_90a (0 errors), 1 case refused"), std::string::npos) << r.out;
}

// --case-timeout: a case still running past it ends the process with exit 1,
// naming the case (a hung kernel cannot be recovered in-process); cases
// within it run as before.
TEST(Cli, CaseTimeoutNamesTheCase) {
  const std::string big = "--op moe_reduce_fused --variant Base --backend cpu "
                          "--shape 'T=3522,K=1,H=8176,experts=188,ep=1,dtype=fp16,routing=uniform'";
  auto r = run("test " + big + " --case-timeout 0.2");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("TIMEOUT moe_reduce_fused/Base/shape:T=3522,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on the CPU backend after --case-timeout 0.2 s"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("GPU context"), std::string::npos) << r.out;  // the GPU wording is not the CPU one
  r = run("test --op moe_reduce_fused --variant Base --backend cpu --shape 'T=5,K=2,H=64,dtype=bf16' --case-timeout 60");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(run("test --op moe_reduce_fused --case-timeout -1 --backend cpu").rc, 2);
}

TEST(Cli, TestRandomShapes) {
  auto r = run("test --op moe_topk_gate --random 3 --seed 11 --backend cpu");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("3 passed, 0 failed"), std::string::npos) << r.out;
  const auto first = r.out.find("moe_topk_gate/Default/shape:");
  ASSERT_NE(first, std::string::npos) << r.out;
  const std::string shape = r.out.substr(first + 28, r.out.find(' ', first) - first - 28);
  auto again = run("test --op moe_topk_gate --shape '" + shape + "' --seed 11 --backend cpu");
  EXPECT_EQ(again.rc, 0) << again.out;
  EXPECT_NE(again.out.find("shape:" + shape + " "), std::string::npos) << again.out;
  EXPECT_NE(run("test --op moe_topk_gate --random 3 --seed 11 --backend cpu").out.find(shape), std::string::npos);
  for (const char* bad : {"test --random 2 --backend cpu", "test --op fused_moe --tag smoke --random 2 --backend cpu",
                          "test --op fused_moe --random -1 --backend cpu"}) {
    r = run(bad);
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--random"), std::string::npos) << bad << ": " << r.out;
  }
}
