// A node's attributes reach CSE and the plan key through one list (NodeAttrs::visit_attrs):
// every attribute must change the words it produces, or two different ops would be merged by
// CSE and share a cached plan.
#include "engine/node.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

using namespace kiln::detail;

namespace {

std::vector<uint64_t> words(const NodeAttrs& a) {
  std::vector<uint64_t> w;
  Layout layout;
  layout.shape = {2, 3};
  layout.strides = {3, 1};
  a.visit_attrs(OpCode::view, layout, [&](uint64_t x) { w.push_back(x); });
  return w;
}

} // namespace

TEST(NodeAttrs, EveryAttributeChangesTheVisitedWords) {
  // A new attribute: add it to NodeAttrs::visit_attrs and a line below, then update the size.
  static_assert(sizeof(NodeAttrs) == 168, "an attribute was added or removed: see this test");
  const std::vector<std::function<void(NodeAttrs&)>> changes = {
      [](NodeAttrs& a) { a.scalar = -0.0; },
      [](NodeAttrs& a) { a.iscalar = 1; },
      [](NodeAttrs& a) { a.scalar2 = 1; },
      [](NodeAttrs& a) { a.seed = 1; },
      [](NodeAttrs& a) { a.counter = 1; },
      [](NodeAttrs& a) { a.axes = 1; },
      [](NodeAttrs& a) { a.keepdim = true; },
      [](NodeAttrs& a) { a.dim = -1; },
      [](NodeAttrs& a) { a.select = true; },
      [](NodeAttrs& a) { a.view.kind = ViewPrim::Kind::slice; },
      [](NodeAttrs& a) {
        a.view.shape = {3, 2};
      },
      [](NodeAttrs& a) { a.view.dim = 1; },
      [](NodeAttrs& a) { a.view.start = 1; },
      [](NodeAttrs& a) { a.view.step = 2; },
      [](NodeAttrs& a) { a.view.length = 1; },
  };
  const NodeAttrs base;
  for (size_t i = 0; i < changes.size(); ++i) {
    NodeAttrs changed = base;
    changes[i](changed);
    EXPECT_NE(words(changed), words(base)) << "change " << i << " is not visited";
  }
  // A view's layout is part of its identity too.
  Layout other;
  other.shape = {2, 3};
  other.strides = {1, 2};
  std::vector<uint64_t> w;
  base.visit_attrs(OpCode::view, other, [&](uint64_t x) { w.push_back(x); });
  EXPECT_NE(w, words(base));
}
