// The plan key's walk given the key it is likely to produce (the last plan's): where every word
// agrees the walk reports a match and writes no key; where any word differs, the key it writes is
// the one a walk without an expectation writes, word for word, whichever key it was given.
#include "engine/plan_key.h"

#include "engine/graph.h"
#include "engine/loop_detect.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <memory>
#include <vector>

using namespace kiln;
using detail::ExpectedKey;
using detail::Walk;

namespace {

struct PlanKey : ::testing::Test {
  void SetUp() override {
    set_default_device(Device::cpu());
    set_eager(false);
    manual_seed(5);
  }
};

Tensor realized(const Shape& s) {
  Tensor t = randn(s);
  eval(t);
  return t;
}

// Walks are filled in place: a Walk holds an llvm::SmallVector, whose growth lives in LLVM's
// support library, which the tests do not link.
std::unique_ptr<Walk> walk(const Tensor& t, ExpectedKey expect = {}) {
  auto w = std::make_unique<Walk>();
  detail::walk_pending({t.node()}, *w, expect);
  return w;
}

// Graphs whose keys share prefixes of several lengths: one step, two steps (the first step's
// key is a prefix of nothing, but agrees for its first nodes), another shape, another op.
std::vector<Tensor> graphs(const Tensor& x, const Tensor& w, const Tensor& y) {
  Tensor a = tanh(matmul(x, w) + 1.0f);
  Tensor b = tanh(matmul(a, w) + 1.0f);
  return {a, b, tanh(y + 1.0f), sigmoid(matmul(x, w) + 1.0f), x * 2.0f};
}

} // namespace

TEST_F(PlanKey, AWalkGivenItsOwnKeyMatchesAndWritesNone) {
  const Tensor x = realized({4, 8}), w = realized({8, 8});
  const Tensor a = tanh(matmul(x, w) + 1.0f);
  const auto plain = walk(a);
  ASSERT_FALSE(plain->key.empty());
  EXPECT_FALSE(plain->matched);
  const auto again = walk(a, {&plain->key, plain->hash});
  EXPECT_TRUE(again->matched);
  EXPECT_TRUE(again->key.empty());
  EXPECT_EQ(again->hash, plain->hash);
  EXPECT_EQ(again->nodes, plain->nodes);
  EXPECT_EQ(again->uses, plain->uses);
}

TEST_F(PlanKey, AWalkGivenAnotherKeyWritesItsOwnWordForWord) {
  const Tensor x = realized({4, 8}), w = realized({8, 8}), y = realized({4, 4});
  const std::vector<Tensor> gs = graphs(x, w, y);
  std::vector<std::unique_ptr<Walk>> plain;
  for (const Tensor& g : gs) plain.push_back(walk(g));
  for (size_t i = 0; i < gs.size(); ++i) {
    for (size_t j = 0; j < gs.size(); ++j) {
      const auto w2 = walk(gs[i], {&plain[j]->key, plain[j]->hash});
      EXPECT_EQ(w2->matched, i == j) << "graph " << i << ", expected the key of " << j;
      if (i == j) continue;
      EXPECT_EQ(w2->key, plain[i]->key) << "graph " << i << ", expected the key of " << j;
      EXPECT_EQ(w2->hash, plain[i]->hash);
    }
  }
  // A key that agrees with all of graph 0's words and has more: no match, graph 0's own key.
  std::vector<uint64_t> longer = plain[0]->key;
  longer.push_back(7);
  const auto w3 = walk(gs[0], {&longer, 1});
  EXPECT_FALSE(w3->matched);
  EXPECT_EQ(w3->key, plain[0]->key);
  EXPECT_EQ(w3->hash, plain[0]->hash);
}

// A loop whose plan repeats (its walks match the last plan) and now and then changes (they
// do not, and the plan they find is another cached one): the values of plans made afresh.
TEST_F(PlanKey, RepeatedAndAlternatingPlansGiveTheValuesOfFreshPlans) {
  auto run = [](int plans_kept) {
    set_plan_cache_limit(plans_kept);
    manual_seed(9);
    Tensor x = realized({4, 8});
    const Tensor w = realized({8, 8});
    std::vector<float> out;
    for (int i = 0; i < 12; ++i) {
      x = i % 3 == 2 ? sigmoid(matmul(x, w) - 0.5f) : tanh(matmul(x, w) * 0.5f + 0.25f);
      eval(x);
      for (float v : x.to_vector<float>()) out.push_back(v);
    }
    return out;
  };
  reset_stats();
  const std::vector<float> cached = run(256);
  EXPECT_GE(stats().plan_hits, 8) << stats();
  const std::vector<float> fresh = run(0);
  set_plan_cache_limit(256);
  EXPECT_EQ(cached, fresh);
}

// Tokens stand for a pending node's static words (op, dtype, device, shape, attributes): nodes
// with equal words share one, whatever recorded them; other words get another, even where their
// kinds (the table's buckets) collide; and a node keyed by its token keys apart from the same
// node spelled out, so a walk with tokens never matches a key without them.
TEST_F(PlanKey, TokensStandForExactlyTheStaticWords) {
  const Tensor x = realized({4, 8}), y = realized({4, 8}), z = realized({2, 8});
  const Tensor a = tanh(x + 1.0f), b = tanh(y * 2.0f), c = tanh(z + 1.0f);
  const Tensor s1 = slice(a, 0, 1, 3), s2 = slice(a, 0, 2, 4); // views: attributes differ
  auto token = [](const Tensor& t, uint64_t kind) {
    return detail::static_words_token(t.node(), kind);
  };
  const uint64_t kind_a = detail::op_kind_hash(a.node());
  const uint32_t ta = token(a, kind_a);
  ASSERT_NE(ta, 0u);
  EXPECT_EQ(token(b, detail::op_kind_hash(b.node())), ta); // another node, the same words
  EXPECT_EQ(token(a, kind_a), ta);
  EXPECT_NE(token(c, kind_a), ta); // another shape, in the same bucket
  EXPECT_NE(token(s1, kind_a), token(s2, kind_a));
  EXPECT_EQ(token(s1, 1), token(s1, 1));

  const auto spelled = walk(b);
  b.node()->key_token = ta;
  const auto tokened = walk(b);
  b.node()->key_token = 0;
  EXPECT_NE(tokened->key, spelled->key);
  EXPECT_LT(tokened->key.size(), spelled->key.size());
}

// Tokens only find the plan a walk expects, or a plan whose last evaluation had the same token
// key; the plan cache is keyed by the words spelled out. So loops plan the same with tokens and
// without: one evaluated every step whose body alternates (its bodies' tokens change as the loop
// is found, lost and found again), one without eval, and one with two evaluations a step.
TEST_F(PlanKey, TokensChangeNoPlan) {
  auto run = [](bool tokens) {
    detail::engine().key_tokens = tokens;
    set_loop_flush(true); // the loop detector starts afresh
    const int64_t plans = detail::engine().max_plans;
    set_plan_cache_limit(0);
    set_plan_cache_limit(plans);
    manual_seed(9);
    reset_stats();
    Tensor x = realized({4, 8}), h = realized({2, 8});
    const Tensor w = realized({8, 8});
    std::vector<float> out;
    for (int i = 0; i < 30; ++i) {
      x = i % 3 == 2 ? sigmoid(matmul(x, w) - 0.5f) : tanh(matmul(x, w) * 0.5f + 0.25f);
      eval(x);
    }
    for (int i = 0; i < 200; ++i) h = tanh(matmul(h, w) + h * 0.5f);
    for (int i = 0; i < 30; ++i) { // two evaluations a step: their plans alternate
      h = tanh(matmul(h, w) * 0.5f) + h * 0.25f;
      eval(h);
      const Tensor s = sum(h * h) + 1.0f;
      eval(s);
      out.push_back(s.item<float>());
    }
    for (const Tensor& t : {x, h})
      for (float v : t.to_vector<float>()) out.push_back(v);
    return std::pair{out, stats()};
  };
  const auto [with, with_stats] = run(true);
  const auto [without, without_stats] = run(false);
  detail::engine().key_tokens = true;
  EXPECT_EQ(with, without);
  EXPECT_EQ(with_stats.plan_misses, without_stats.plan_misses) << with_stats << "\n"
                                                               << without_stats;
  EXPECT_EQ(with_stats.plan_hits, without_stats.plan_hits);
  EXPECT_EQ(with_stats.flushes, without_stats.flushes);
  EXPECT_GE(with_stats.plan_hits, 80) << with_stats;
}

// The table of tokens is bounded (it forgets its entries past 65,536), but a token is never
// given again: words interned after it forgot get new numbers, so an old token held by a node or
// a plan's token key still stands for its words alone.
TEST_F(PlanKey, ForgottenTokensAreNeverGivenAgain) {
  const Tensor a = tanh(realized({1, 1}) + 1.0f);
  detail::Node* n = a.node();
  const detail::Layout kept = n->layout;
  auto token_of = [n](int64_t rows) {
    n->layout.shape = Shape{rows, 1};
    return detail::static_words_token(n, detail::op_kind_hash(n));
  };
  const uint32_t first = token_of(1);
  uint32_t last = first;
  for (int64_t rows = 2; rows < 70'000; ++rows) {
    const uint32_t t = token_of(rows);
    ASSERT_GT(t, last) << rows; // new words, a new number
    last = t;
  }
  const uint32_t again = token_of(1); // forgotten by now: interned afresh
  n->layout = kept;
  EXPECT_GT(again, last);
  EXPECT_NE(again, first);
}
