// KILN_DUMP=passes: the planner's marks and groups after each pass, then the plan.
#include "engine/graph.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <string>

using namespace kiln;

TEST(PassDump, PrintsTheMarksAndGroupsAfterEachPassThenThePlan) {
  set_default_device(Device::cpu());
  Tensor x = randn({4, 8});
  eval(x);
  detail::EngineState& e = detail::engine();
  const bool plan_before = e.dump_plan, passes_before = e.dump_passes;
  e.dump_plan = e.dump_passes = true; // as KILN_DUMP=passes sets them at start-up
  testing::internal::CaptureStderr();
  Tensor y = softmax(x * 3.0f, 1); // held: written as well as z
  Tensor z = y + 1;
  eval(z);
  const std::string out = testing::internal::GetCapturedStderr();
  e.dump_plan = plan_before;
  e.dump_passes = passes_before;
  const size_t mark = out.find("after collect and mark: 9 pending node(s)");
  const size_t split = out.find("after split_long_chains:");
  const size_t group = out.find("after group: 9 pending node(s), 1 group(s)");
  const size_t plan = out.find("plan: 1 step(s), 2 buffer(s) written");
  ASSERT_NE(mark, std::string::npos) << out;
  ASSERT_NE(split, std::string::npos) << out;
  ASSERT_NE(group, std::string::npos) << out;
  ASSERT_NE(plan, std::string::npos) << out;
  EXPECT_LT(mark, split);
  EXPECT_LT(split, group);
  EXPECT_LT(group, plan);
  EXPECT_NE(out.find("div f32 (4, 8), written: live handle, group 0"), std::string::npos) << out;
  EXPECT_NE(out.find("group 0: reduction kernel over (4, 8), writes"), std::string::npos) << out;
}
