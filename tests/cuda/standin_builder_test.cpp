// The stand-in's argument blocks (codegen/standin.h), without a GPU: what it refuses and why,
// and how few value slots a tape needs. tests/cuda/standin_gpu_test.cpp runs it on a GPU.
#include "../scoped_env.h"
#include "codegen/device/standin_program.h"
#include "codegen/jit.h"
#include "codegen/standin.h"
#include "codegen_fixture.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::detail;
using namespace kt_codegen;

namespace {

std::string why_not(const FusedKernel& k) {
  std::string why;
  const std::optional<StandinLaunch> s =
      plan_standin(k, choose_variant(k, std::vector<void*>(16, nullptr), target()), target(), &why);
  return s ? "" : why;
}

standin::Program program_of(const StandinLaunch& s) {
  uint64_t at = 0;
  std::memcpy(&at, s.params.bytes.data(), 8);
  standin::Program p;
  std::memcpy(&p, s.params.bytes.data() + at, sizeof p);
  return p;
}

TEST_F(Codegen, TheStandinRefusesWhatItCannotMirrorAndSaysWhy) {
  Tensor x = randn({64, 32});
  eval(x);
  EXPECT_EQ(why_not(kernel_of([&] { return sum(exp(x), {1}); })), "");
  // Nine reductions of one row: more accumulators than the interpreter keeps.
  FusedKernel nine = kernel_of([&] { return sum(x, {1}); });
  ASSERT_EQ(nine.outputs.size(), 1u);
  for (int i = 1; i < 9; ++i) {
    nine.tape.push_back(nine.tape[nine.outputs[0].value]);
    nine.outputs.push_back(nine.outputs[0]);
    nine.outputs.back().value = static_cast<int>(nine.tape.size()) - 1;
  }
  EXPECT_NE(why_not(nine).find("9 reductions"), std::string::npos) << why_not(nine);
  set_reproducible(true);
  const FusedKernel repro = kernel_of([&] { return tanh(x) * 2; });
  set_reproducible(false);
  EXPECT_NE(why_not(repro).find("reproducible"), std::string::npos);
  EXPECT_EQ(why_not(kernel_of([&] { return tanh(x) * 2; })), "");
}

// Values take slots only while they are live: a long chain needs two, so it runs on the small
// interpreter; forty values all stored at the end need forty, the large one.
TEST_F(Codegen, TheStandinsSlotsFollowTheLiveValues) {
  Tensor x = randn({1000});
  eval(x);
  const FusedKernel chain = kernel_of([&] {
    Tensor y = x;
    for (int i = 0; i < 40; ++i) y = i % 2 ? tanh(y) : y * 1.5f;
    return y;
  });
  std::string why;
  std::optional<StandinLaunch> s = plan_standin(chain, CudaVariant{}, target(), &why);
  ASSERT_TRUE(s) << why;
  EXPECT_FALSE(s->large);
  EXPECT_EQ(program_of(*s).n_inst, chain.tape.size());

  // One input and twenty values of it, all stored: twenty live at once at the end.
  FusedKernel wide;
  wide.shape = Shape{1000};
  KernelInput in;
  in.strides = Shape{1};
  in.cls = IndexClass::contiguous;
  wide.inputs.push_back(in);
  TapeInst load;
  load.op = OpCode::load;
  load.a = 0;
  wide.tape.push_back(load);
  for (int v = 1; v <= 20; ++v) {
    TapeInst t;
    t.op = v % 2 ? OpCode::tanh : OpCode::exp;
    t.a = v - 1;
    wide.tape.push_back(t);
    KernelOutput o;
    o.value = v;
    o.slot = v;
    o.strides = Shape{1};
    wide.outputs.push_back(o);
  }
  s = plan_standin(wide, CudaVariant{}, target(), &why);
  ASSERT_TRUE(s) << why;
  EXPECT_TRUE(s->large) << "20 live values on the 16-slot interpreter";
  EXPECT_EQ(program_of(*s).n_out, 20);
}

// KILN_COMPILE was a flag: its spellings keep their meaning, in any case.
TEST_F(Codegen, KilnCompileTakesTheModesAndTheFlagsSpellings) {
  const std::pair<const char*, CompileMode> cases[] = {{"background", CompileMode::background},
                                                       {"sync", CompileMode::sync},
                                                       {"standin", CompileMode::standin},
                                                       {"0", CompileMode::off},
                                                       {"OFF", CompileMode::off},
                                                       {"False", CompileMode::off},
                                                       {"no", CompileMode::off},
                                                       {"1", CompileMode::background},
                                                       {"Yes", CompileMode::background},
                                                       {"SYNC", CompileMode::sync}};
  for (const auto& [value, mode] : cases) {
    kt::ScopedEnv env("KILN_COMPILE", value);
    EXPECT_EQ(compile_mode(), mode) << value;
  }
  kt::ScopedEnv unset("KILN_COMPILE", nullptr);
  EXPECT_EQ(compile_mode(), CompileMode::background);
}

} // namespace
