// KILN_* settings: every variable parses one way, and a value that does not parse is reported
// on stderr and ignored instead of being silently taken for something (ir/env.h), and kiln's
// own variables are read through one table (ir/settings.def) that README.md documents.
// KILN_DEVICE is stricter: a bad value throws when the default device is first needed.
#include "../scoped_env.h"
#include "ir/env.h"
#include "ir/settings.h"
#include "runtime/backend.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/thread_pool.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <string>

namespace {

using kiln::detail::env_choice;
using kiln::detail::env_flag;
using kiln::detail::env_int;

using kt::ScopedEnv;

// Runs fn with stderr captured; returns what it printed.
template <class Fn> std::string stderr_of(Fn fn) {
  testing::internal::CaptureStderr();
  fn();
  return testing::internal::GetCapturedStderr();
}

TEST(Env, IntegersInRange) {
  std::optional<int64_t> v;
  {
    ScopedEnv e("KILN_TEST_INT", "42");
    EXPECT_EQ(stderr_of([&] { v = env_int("KILN_TEST_INT", 1, 100); }), "");
    EXPECT_EQ(v, 42);
  }
  for (const char* bad : {"10k", "abc", "0", "101", " 5", "99999999999999999999999"}) {
    ScopedEnv e("KILN_TEST_INT", bad);
    std::string err = stderr_of([&] { v = env_int("KILN_TEST_INT", 1, 100); });
    EXPECT_EQ(v, std::nullopt) << bad;
    EXPECT_EQ(err, std::string("kiln: ignoring KILN_TEST_INT=") + bad +
                       ": expected an integer in [1, 100]\n");
  }
  unsetenv("KILN_TEST_INT");
  EXPECT_EQ(stderr_of([&] { v = env_int("KILN_TEST_INT", 1, 100); }), "");
  EXPECT_EQ(v, std::nullopt);
}

TEST(Env, Flags) {
  std::optional<bool> v;
  for (const char* on : {"1", "true", "ON", "yes"}) {
    ScopedEnv e("KILN_TEST_FLAG", on);
    EXPECT_EQ(env_flag("KILN_TEST_FLAG"), true) << on;
  }
  for (const char* off : {"0", "False", "off", "no"}) {
    ScopedEnv e("KILN_TEST_FLAG", off);
    EXPECT_EQ(env_flag("KILN_TEST_FLAG"), false) << off;
  }
  ScopedEnv e("KILN_TEST_FLAG", "2");
  std::string err = stderr_of([&] { v = env_flag("KILN_TEST_FLAG"); });
  EXPECT_EQ(v, std::nullopt);
  EXPECT_NE(err.find("ignoring KILN_TEST_FLAG=2: expected 1/0"), std::string::npos) << err;
}

TEST(Env, Choices) {
  std::optional<std::string> v;
  {
    ScopedEnv e("KILN_TEST_CHOICE", "plan");
    EXPECT_EQ(env_choice("KILN_TEST_CHOICE", {"plan"}), "plan");
  }
  ScopedEnv e("KILN_TEST_CHOICE", "foo");
  std::string err = stderr_of([&] { v = env_choice("KILN_TEST_CHOICE", {"0", "1", "all"}); });
  EXPECT_EQ(v, std::nullopt);
  EXPECT_EQ(err, "kiln: ignoring KILN_TEST_CHOICE=foo: expected one of 0, 1, all\n");
}

TEST(Env, DeviceNames) {
  using kiln::detail::device_from_env;
  {
    ScopedEnv e("KILN_DEVICE", "cpu");
    EXPECT_EQ(device_from_env(), kiln::Device::cpu());
  }
  for (const char* bad :
       {"cudafoo", "cuda:", "cuda:x", "cuda:1x", "cuda:-1", "CPU", "gpu", "cuda:99999999999"}) {
    ScopedEnv e("KILN_DEVICE", bad);
    try {
      device_from_env();
      ADD_FAILURE() << "KILN_DEVICE=" << bad << " was accepted";
    } catch (const kiln::Error& err) {
      EXPECT_NE(std::string(err.what()).find("is not one of cpu, cuda, cuda:N"), std::string::npos)
          << err.what();
    }
  }
  if (kiln::is_available(kiln::Device::cuda(0))) GTEST_SKIP() << "a GPU is present";
  ScopedEnv e("KILN_DEVICE", "cuda");
  try {
    device_from_env();
    ADD_FAILURE() << "KILN_DEVICE=cuda was accepted without a GPU";
  } catch (const kiln::Error& err) {
    // Names the real reason: a CUDA build says what the driver said, not "no CUDA backend".
#ifdef KILN_HAVE_CUDA
    EXPECT_NE(std::string(err.what()).find("no usable CUDA device or driver"), std::string::npos)
        << err.what();
#else
    EXPECT_NE(std::string(err.what()).find("has no CUDA backend"), std::string::npos) << err.what();
#endif
  }
}

TEST(Env, NoDeviceVariableMeansCudaWhenAvailable) {
  unsetenv("KILN_DEVICE");
  const kiln::Device want =
      kiln::is_available(kiln::Device::cuda(0)) ? kiln::Device::cuda(0) : kiln::Device::cpu();
  EXPECT_EQ(kiln::detail::device_from_env(), want);
}

} // namespace

namespace {

TEST(Settings, OneTableReadsEveryVariable) {
  using kiln::detail::all_settings;
  using kiln::detail::Setting;
  using kiln::detail::setting_info;
  ASSERT_FALSE(all_settings().empty());
  for (const auto& s : all_settings()) {
    EXPECT_EQ(&setting_info(s.id), &s);
    EXPECT_EQ(std::string(s.variable).rfind("KILN_", 0), 0u) << s.variable;
    EXPECT_NE(std::string(s.doc), "") << s.variable;
  }
  {
    ScopedEnv e("KILN_PLAN_CACHE", "10k");
    std::optional<int64_t> v;
    std::string err = stderr_of([&] { v = kiln::detail::setting_int(Setting::plan_cache); });
    EXPECT_EQ(v, std::nullopt);
    EXPECT_EQ(err, "kiln: ignoring KILN_PLAN_CACHE=10k: expected an integer in [0, "
                   "9223372036854775807]\n");
    // Reported once: a setting read again says nothing more.
    EXPECT_EQ(stderr_of([&] { v = kiln::detail::setting_int(Setting::plan_cache); }), "");
  }
  {
    ScopedEnv e("KILN_SMALL_MATMUL", "some");
    std::string err = stderr_of([] { kiln::detail::setting_text(Setting::small_matmul); });
    EXPECT_EQ(err, "kiln: ignoring KILN_SMALL_MATMUL=some: expected one of 0, 1, cuda, all\n");
  }
  EXPECT_THROW(kiln::detail::setting_int(Setting::eager), kiln::Error); // a flag read as a number
}

// README.md's environment table lists exactly the variables of the settings table.
TEST(Settings, TheReadmeDocumentsEverySetting) {
  std::ifstream f(std::filesystem::path(__FILE__).parent_path() / "../../README.md");
  ASSERT_TRUE(f) << "README.md not found";
  std::set<std::string> documented;
  std::regex row(R"(^\| `(KILN_[A-Z0-9_]+))");
  for (std::string line; std::getline(f, line);)
    if (std::smatch m; std::regex_search(line, m, row)) documented.insert(m[1]);
  std::set<std::string> table;
  for (const auto& s : kiln::detail::all_settings()) table.insert(s.variable);
  EXPECT_EQ(documented, table);
}

// KILN_CUBLAS is read once a process, so each value runs in a fresh one (the death test runs the
// test binary again): 1 and the flag words for on and off, and wait.
TEST(Settings, KilnCublasIsOnOffOrWait) {
  struct Case {
    const char* value;
    bool on, waits;
  };
  const Case cases[] = {{"1", true, false},  {"on", true, false},   {"wait", true, true},
                        {"0", false, false}, {"off", false, false}, {"no", false, false}};
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const Case& c : cases) {
    ScopedEnv e("KILN_CUBLAS", c.value);
    EXPECT_EXIT(std::exit(kiln::cublas() == c.on && kiln::cublas_waits() == c.waits ? 0 : 1),
                ::testing::ExitedWithCode(0), "")
        << "KILN_CUBLAS=" << c.value;
  }
  GTEST_FLAG_SET(death_test_style, "fast");
}

// KILN_NUM_THREADS governs GEMMs too: OpenBLAS runs single-threaded and kiln splits large
// products over its own pool (ctest runs this once more with KILN_NUM_THREADS=1).
TEST(Settings, OneThreadCountForKilnAndOpenBlas) {
  using namespace kiln;
  Tensor a = ones({64, 64}, DType::f32, Device::cpu()),
         b = ones({64, 64}, DType::f32, Device::cpu());
  EXPECT_EQ(sum(matmul(a, b)).item<float>(), 64.0f * 64 * 64); // through OpenBLAS
  EXPECT_EQ(kiln::detail::cpu::blas_threads(), 1);
  if (const char* n = std::getenv("KILN_NUM_THREADS"))
    EXPECT_EQ(kiln::detail::cpu::num_threads(), std::atoi(n));
}

} // namespace
