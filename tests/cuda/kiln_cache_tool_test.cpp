// The kiln-cache tool (tools/kiln-cache) on a cache filled by NVRTC (no GPU needed): every
// command's output and exit status, its JSON, damage found and healed, prune and clear, and
// export/import round trips. Runs the built tool as a user would.
#include "../scoped_env.h"
#include "codegen/jit.h"
#include "codegen/nvrtc/compile_workers.h"
#include "codegen_fixture.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <sys/wait.h>

using namespace kt_codegen;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct ToolRun {
  int status = -1;
  std::string out;
};

ToolRun tool(const std::string& args) {
  ToolRun r;
  const std::string cmd = std::string(KILN_CACHE_TOOL) + " " + args + " 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

struct KilnCacheTool : Codegen {
  std::string dir, other;
  std::vector<std::string> names; // the kernels' entry points
  void SetUp() override {
    Codegen::SetUp();
    if (IsSkipped()) return; // no NVRTC to fill the cache with
    dir = temp_dir(), other = temp_dir();
    Tensor x = randn({64}), y = randn({8, 8});
    eval(x, y);
    const std::vector<FusedKernel> ks = {kernel_of([&] { return tanh(x) * 3; }),
                                         kernel_of([&] { return exp(y) + y; }),
                                         kernel_of([&] { return sum(y * y, {1}); })};
    Jit jit(target(), dir);
    for (const FusedKernel& k : ks) names.push_back(jit.build(k, {true, false}).name);
    Jit again(target(), dir); // later processes: two hits
    again.build(ks[0], {true, false});
    again.build(ks[0], {true, false});
  }
  void TearDown() override {
    if (dir.empty()) return;
    fs::remove_all(dir);
    fs::remove_all(other);
    Codegen::TearDown();
  }
  static std::string temp_dir() {
    std::string t = (fs::temp_directory_path() / "kiln-cache-tool-XXXXXX").string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    return t;
  }
  ToolRun in(const std::string& d, const std::string& args) {
    return tool("--dir " + d + " --arch 90 --nvrtc 13000 " + args);
  }
  std::string entry_file(const std::string& d) {
    for (const auto& e : fs::directory_iterator(d))
      if (e.path().extension() == ".kce") return e.path().string();
    return {};
  }
};

TEST_F(KilnCacheTool, StatsAndListTellWhatIsThere) {
  ToolRun s = in(dir, "stats --json");
  ASSERT_EQ(s.status, 0) << s.out;
  const json j = json::parse(s.out);
  EXPECT_EQ(j["entries"], 3);
  EXPECT_EQ(j["damaged"], 0);
  EXPECT_EQ(j["hits"], 2);
  EXPECT_EQ(j["usable_here"], 3);
  EXPECT_GT(j["compile_ms_saved"].get<double>(), 0.0);
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"][0]["arch"], 90);

  ToolRun l = in(dir, "list --json --sort hits");
  ASSERT_EQ(l.status, 0) << l.out;
  const json entries = json::parse(l.out);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0]["name"], names[0]) << "the kernel with a hit first";
  EXPECT_EQ(entries[0]["hits"], 2);
  EXPECT_EQ(entries[0]["format"], "cubin");
  EXPECT_TRUE(entries[0]["usable_here"].get<bool>());

  ToolRun human = in(dir, "list");
  EXPECT_EQ(human.status, 0);
  for (const std::string& n : names) EXPECT_NE(human.out.find(n), std::string::npos) << human.out;
  // Another GPU cannot use them.
  ToolRun foreign = tool("--dir " + dir + " --arch 80 --nvrtc 13000 stats --json");
  EXPECT_EQ(json::parse(foreign.out)["usable_here"], 0) << foreign.out;
  ToolRun filtered = in(dir, "list --json --filter " + names[1]);
  EXPECT_EQ(json::parse(filtered.out).size(), 1u) << filtered.out;
}

TEST_F(KilnCacheTool, ShowGivesKeySourceAndLog) {
  ToolRun s = in(dir, "show " + names[1]);
  ASSERT_EQ(s.status, 0) << s.out;
  EXPECT_NE(s.out.find("key ("), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("target arch"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("extern \"C\" __global__"), std::string::npos) << s.out;
  ToolRun j = in(dir, "show --json " + names[1]);
  const json e = json::parse(j.out);
  EXPECT_EQ(e["name"], names[1]);
  EXPECT_NE(e["source"].get<std::string>().find(names[1]), std::string::npos);
  EXPECT_NE(e["key"].get<std::string>().find("sm_90"), std::string::npos);
  // by hash prefix, and errors
  const std::string hash = e["hash"];
  EXPECT_EQ(in(dir, "show " + hash.substr(0, 6)).status, 0);
  ToolRun none = in(dir, "show no_such_kernel");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.out.find("no entry named or hashed 'no_such_kernel'"), std::string::npos);
}

TEST_F(KilnCacheTool, VerifyFindsDamageAndFixHealsIt) {
  EXPECT_EQ(in(dir, "verify").status, 0);
  const std::string victim = entry_file(dir);
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x5a'); // a flipped byte in the binary section
  }
  ToolRun bad = in(dir, "verify --json");
  EXPECT_EQ(bad.status, 1) << bad.out;
  const json j = json::parse(bad.out);
  ASSERT_EQ(j["damaged"].size(), 1u);
  EXPECT_EQ(j["damaged"][0]["path"], victim);
  EXPECT_NE(j["damaged"][0]["problem"].get<std::string>().find("checksum"), std::string::npos);
  ToolRun fixed = in(dir, "verify --fix");
  EXPECT_EQ(fixed.status, 0) << fixed.out;
  EXPECT_FALSE(fs::exists(victim));
  EXPECT_EQ(in(dir, "verify").status, 0);
  EXPECT_EQ(json::parse(in(dir, "stats --json").out)["entries"], 2);
}

TEST_F(KilnCacheTool, PruneAndClear) {
  ToolRun dry = in(dir, "prune --max-size 1 --dry-run --json");
  ASSERT_EQ(dry.status, 0) << dry.out;
  EXPECT_EQ(json::parse(dry.out)["entries"].size(), 3u);
  EXPECT_EQ(json::parse(in(dir, "stats --json").out)["entries"], 3) << "a dry run removes nothing";
  ToolRun old = in(dir, "prune --older-than 1d --json");
  EXPECT_EQ(json::parse(old.out)["entries"].size(), 0u) << "all were used just now";
  ToolRun foreign = tool("--dir " + dir + " --arch 80 --nvrtc 13000 prune --foreign --json");
  EXPECT_EQ(json::parse(foreign.out)["entries"].size(), 3u) << foreign.out;
  EXPECT_EQ(json::parse(in(dir, "stats --json").out)["entries"], 0);
  EXPECT_EQ(in(dir, "prune --older-than soon").status, 2) << "a malformed duration";
  fs::create_directories(other);
  EXPECT_EQ(in(other, "clear").status, 0);
}

TEST_F(KilnCacheTool, ExportImportRoundTrip) {
  const std::string archive = other + "/warm.kca";
  ToolRun e = in(dir, "export " + archive);
  ASSERT_EQ(e.status, 0) << e.out;
  const std::string target_dir = other + "/fresh";
  ToolRun i = in(target_dir, "import --json " + archive);
  ASSERT_EQ(i.status, 0) << i.out;
  EXPECT_EQ(json::parse(i.out)["added"], 3);
  EXPECT_EQ(in(target_dir, "verify").status, 0);
  // Same entries, byte for byte, and kiln loads them: a Jit there compiles nothing.
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ".kce") {
      std::ifstream a(f.path(), std::ios::binary),
          b(target_dir + "/" + f.path().filename().string(), std::ios::binary);
      std::string sa((std::istreambuf_iterator<char>(a)), {}),
          sb((std::istreambuf_iterator<char>(b)), {});
      EXPECT_EQ(sa, sb) << f.path();
    }
  ToolRun again = in(target_dir, "import --json " + archive);
  EXPECT_EQ(json::parse(again.out)["unchanged"], 3);
  // A damaged archive adds nothing.
  std::string bytes;
  {
    std::ifstream a(archive, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(a)), {});
  }
  std::ofstream(archive, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  ToolRun cut = in(other + "/cut", "import " + archive);
  EXPECT_EQ(cut.status, 1);
  EXPECT_NE(cut.out.find("truncated"), std::string::npos) << cut.out;
  EXPECT_FALSE(fs::exists(other + "/cut"));
}

TEST_F(KilnCacheTool, WhyNamesTheKeyFieldsAMissDifferedIn) {
  const std::string before = other + "/before", log = other + "/misses.jsonl";
  fs::copy(dir, before); // the cache as the run below finds it
  ::setenv("KILN_CACHE_MISS_LOG", log.c_str(), 1);
  Tensor x = randn({64});
  eval(x);
  {
    Jit sm80(target(80), dir); // a cached kernel, for another GPU
    sm80.build(kernel_of([&] { return tanh(x) * 3; }), {true, false});
    Jit sm90(target(), dir); // a new kernel: one more op
    sm90.build(kernel_of([&] { return tanh(x) * 3 + 1; }), {true, false});
  }
  ::unsetenv("KILN_CACHE_MISS_LOG");
  ToolRun w = in(before, "why --json " + log);
  ASSERT_EQ(w.status, 0) << w.out;
  const json j = json::parse(w.out);
  ASSERT_EQ(j.size(), 2u) << w.out;
  auto differs = [&](const json& m, const std::string& field, const std::string& missed) {
    for (const json& d : m["differences"])
      if (d["field"] == field && d["missed"] == missed) return true;
    return false;
  };
  EXPECT_TRUE(differs(j[0], "target arch", "sm_80")) << j[0];
  EXPECT_EQ(j[0]["differences"].size(), 1u) << "only the arch: " << j[0];
  EXPECT_TRUE(differs(j[1], "v5 = op:dtype:operands", "add:f32:3,4")) << j[1];
  // That run compiled and stored both: against the cache now, nothing is missing.
  const json now = json::parse(in(dir, "why --json " + log).out);
  for (const json& m : now) EXPECT_TRUE(m.value("cached_now", false)) << m;
  EXPECT_EQ(in(dir, "why " + other + "/no-such-log").status, 1);
}

// The runtime notes in each miss whether the stand-in interpreter ran the kernel meanwhile
// (runtime/cuda/kernel_cache.cpp); why shows it, and says when the run waited.
TEST_F(KilnCacheTool, WhySaysWhetherTheRunWaitedForACompile) {
  const std::string log = other + "/misses.jsonl";
  ::setenv("KILN_CACHE_MISS_LOG", log.c_str(), 1);
  Tensor x = randn({64});
  eval(x);
  {
    Jit jit(target(), dir);
    CudaKernelSource covered =
        render_cuda(kernel_of([&] { return exp(x) - 2; }), {true, false}, target());
    covered.standin = "covered";
    jit.build(covered);
    CudaKernelSource refused =
        render_cuda(kernel_of([&] { return exp(x) * 5; }), {true, false}, target());
    refused.standin = "9 reductions, more than 8";
    jit.build(refused);
    jit.build(render_cuda(kernel_of([&] { return exp(x) + 7; }), {true, false}, target()));
  }
  ::unsetenv("KILN_CACHE_MISS_LOG");
  ToolRun w = in(dir, "why --json " + log);
  ASSERT_EQ(w.status, 0) << w.out;
  const json j = json::parse(w.out);
  ASSERT_EQ(j.size(), 3u) << w.out;
  EXPECT_EQ(j[0].value("standin", ""), "covered") << j[0];
  EXPECT_EQ(j[1].value("standin", ""), "9 reductions, more than 8") << j[1];
  EXPECT_FALSE(j[2].contains("standin")) << "nobody asked the stand-in: " << j[2];
  const std::string text = in(dir, "why " + log).out;
  EXPECT_NE(text.find("stand-in: covered (the run went on while it compiled)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("stand-in: not covered (9 reductions, more than 8): the run waited for this "
                      "compile"),
            std::string::npos)
      << text;
}

// A run's manifest warms another machine's cache: kiln-cache warm compiles its kernels in
// parallel, and the workload then runs there with compiling forbidden.
TEST_F(KilnCacheTool, WarmCompilesARunsManifest) {
  const std::string manifest = other + "/kernels.jsonl", fresh = other + "/fresh";
  Tensor x = randn({64}), y = randn({8, 8});
  eval(x, y);
  const std::vector<FusedKernel> ks = {kernel_of([&] { return tanh(x) * 3; }),
                                       kernel_of([&] { return exp(y) + y; }),
                                       kernel_of([&] { return sum(y * y, {1}); })};
  ::setenv("KILN_CACHE_MANIFEST", manifest.c_str(), 1);
  {
    Jit run(target(), dir); // the workload's run: loads (cached in SetUp), listed all the same
    for (const FusedKernel& k : ks) run.build(k, {true, false});
    run.build(ks[0], {true, false}); // each kernel once
  }
  ::unsetenv("KILN_CACHE_MANIFEST");
  ToolRun w = in(fresh, "warm --json -j 2 " + manifest);
  ASSERT_EQ(w.status, 0) << w.out;
  const json j = json::parse(w.out);
  EXPECT_EQ(j["compiled"], 3) << w.out;
  EXPECT_EQ(j["processes"], 2) << "worker processes, this tool's serve-compiles";
  EXPECT_EQ(json::parse(in(fresh, "warm --json " + manifest).out)["cached"], 3);
  kt::ScopedEnv off("KILN_COMPILE", "0"); // the suite's value is back after the test
  Jit deployed(target(), fresh);
  for (const FusedKernel& k : ks) EXPECT_NO_THROW(deployed.build(k, {true, false}));
  EXPECT_EQ(deployed.stats().compiles, 0);
  EXPECT_EQ(deployed.stats().disk_hits, 3);
}

// A kernel that does not compile: the workers report it, the tool tries it again itself and
// reports the compiler's log; the others are compiled all the same.
TEST_F(KilnCacheTool, WarmReportsAKernelThatDoesNotCompile) {
  const std::string manifest = other + "/broken.jsonl", fresh = other + "/fresh-broken";
  Tensor x = randn({64});
  eval(x);
  const CudaKernelSource good =
      render_cuda(kernel_of([&] { return tanh(x) * 5; }), {true, false}, target());
  const CudaKernelSource broken{
      "kiln_broken", "broken-key",
      "extern \"C\" __global__ void kiln_broken() { undeclared_name = 1; }"};
  {
    std::ofstream out(manifest);
    out << detail::manifest_line(good, target()) << detail::manifest_line(broken, target());
  }
  ToolRun w = in(fresh, "warm --json -j 2 " + manifest);
  EXPECT_EQ(w.status, 1) << w.out;
  const json j = json::parse(w.out);
  EXPECT_EQ(j["compiled"], 1) << w.out;
  ASSERT_EQ(j["failed"].size(), 1u) << w.out;
  EXPECT_NE(j["failed"][0].get<std::string>().find("undeclared_name"), std::string::npos) << w.out;
}

} // namespace
