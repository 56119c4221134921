// Views: reshape, transpose, permute, slice, expand, unsqueeze, squeeze, flatten, chunk, split,
// contiguous, and concat (a copy). Values, shapes, strides and "no copy" are checked, and
// non-contiguous views are fed into elementwise chains.
#include "reference.h"

namespace {

using namespace kt;

class Views : public OpsTest {
protected:
  /// A realized (3, 4) f32 tensor with values 0..11 shifted and scaled (no zeros).
  Tensor iota(const Shape& s, DType t = DType::f32) {
    Vals v(static_cast<size_t>(s.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) + 1;
    Tensor x = make(v, s, t);
    kiln::eval(x);
    return x;
  }
  static Vals iota_vals(int64_t n) {
    Vals v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) + 1;
    return v;
  }
  /// Reference gather: out[idx] = in[offset(idx)] for a view with the given shape and strides
  /// (in elements) over a contiguous base starting at `offset0`.
  static Vals gather(const Vals& base, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& strides, int64_t offset0 = 0) {
    Vals out(static_cast<size_t>(numel(shape)));
    for (int64_t i = 0; i < numel(shape); ++i) {
      auto idx = unravel(i, shape);
      int64_t off = offset0;
      for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * strides[k];
      out[i] = base[off];
    }
    return out;
  }
};

TEST_F(Views, ReshapeValuesAndInference) {
  Tensor x = iota({2, 6});
  Vals v = iota_vals(12);
  EXPECT_TRUE(matches(kiln::reshape(x, {3, 4}), Shape{3, 4}, DType::f32, v));
  EXPECT_TRUE(matches(kiln::reshape(x, {-1, 4}), Shape{3, 4}, DType::f32, v));
  EXPECT_TRUE(matches(kiln::reshape(x, {2, -1, 3}), Shape{2, 2, 3}, DType::f32, v));
  EXPECT_TRUE(matches(kiln::reshape(x, {-1}), Shape{12}, DType::f32, v));
  EXPECT_TRUE(matches(x.reshape({12, 1}), Shape{12, 1}, DType::f32, v));
  EXPECT_TRUE(
      matches(kiln::reshape(kiln::reshape(x, {4, 3}), {1, 12}), Shape{1, 12}, DType::f32, v));
  Tensor one = make({7}, Shape{1}, DType::f32);
  EXPECT_TRUE(matches(kiln::reshape(one, Shape{}), Shape{}, DType::f32, {7}));
}

TEST_F(Views, ReshapeOfContiguousIsNoCopy) {
  Tensor x = iota({4, 6});
  kiln::reset_stats();
  Tensor r = kiln::reshape(x, {2, 12});
  kiln::eval(r);
  EXPECT_EQ(kiln::stats().bytes_allocated, 0);
  EXPECT_EQ(kiln::stats().kernels_run, 0);
  EXPECT_EQ(kiln::stats().copies_run, 0);
  EXPECT_EQ(r.strides(), (Shape{12, 1}));
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_TRUE(matches(r, Shape{2, 12}, DType::f32, iota_vals(24)));
}

TEST_F(Views, ReshapeOfTransposedCopiesInTransposedOrder) {
  Tensor x = iota({3, 4});
  Tensor t = kiln::transpose(x, 0, 1); // (4, 3)
  Tensor r = kiln::reshape(t, {12});
  Vals e = gather(iota_vals(12), {4, 3}, {1, 4});
  EXPECT_TRUE(matches(r, Shape{12}, DType::f32, e));
  EXPECT_TRUE(matches(kiln::reshape(t, {2, -1}), Shape{2, 6}, DType::f32, e));
}

TEST_F(Views, TransposeSwapsStridesWithoutCopy) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(x.strides(), (Shape{4, 1}));
  EXPECT_TRUE(x.is_contiguous());
  kiln::reset_stats();
  Tensor t = kiln::transpose(x, 0, 1);
  EXPECT_EQ(t.shape(), (Shape{4, 3}));
  EXPECT_EQ(t.strides(), (Shape{1, 4}));
  EXPECT_FALSE(t.is_contiguous());
  kiln::eval(t);
  EXPECT_EQ(kiln::stats().bytes_allocated, 0) << "a view of a computed tensor must not copy";
  EXPECT_EQ(kiln::stats().kernels_run, 0);
  EXPECT_EQ(kiln::stats().copies_run, 0);
  EXPECT_TRUE(matches(t, Shape{4, 3}, DType::f32, gather(iota_vals(12), {4, 3}, {1, 4})));
  // Negative dims, and transposing back.
  Tensor t2 = kiln::transpose(x, -1, -2);
  EXPECT_EQ(t2.strides(), (Shape{1, 4}));
  Tensor back = kiln::transpose(t, 1, 0);
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_TRUE(matches(back, Shape{3, 4}, DType::f32, iota_vals(12)));
}

TEST_F(Views, Transpose3DMiddleAxes) {
  Tensor x = iota({2, 3, 4});
  Tensor t = kiln::transpose(x, 1, 2);
  EXPECT_EQ(t.shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(t.strides(), (Shape{12, 1, 4}));
  EXPECT_TRUE(matches(t, Shape{2, 4, 3}, DType::f32, gather(iota_vals(24), {2, 4, 3}, {12, 1, 4})));
}

TEST_F(Views, Permute) {
  Tensor x = iota({2, 3, 4});
  Tensor p = kiln::permute(x, {2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_TRUE(matches(p, Shape{4, 2, 3}, DType::f32, gather(iota_vals(24), {4, 2, 3}, {1, 12, 4})));
  Tensor q = kiln::permute(x, {-1, -3, -2}); // same permutation, negative dims
  EXPECT_TRUE(matches(q, Shape{4, 2, 3}, DType::f32, gather(iota_vals(24), {4, 2, 3}, {1, 12, 4})));
  Tensor id = kiln::permute(x, {0, 1, 2});
  EXPECT_TRUE(id.is_contiguous());
  EXPECT_TRUE(matches(id, Shape{2, 3, 4}, DType::f32, iota_vals(24)));
}

TEST_F(Views, SliceBasicStepNegative) {
  Tensor x = iota({4, 6}); // values 1..24
  Vals base = iota_vals(24);
  Tensor a = kiln::slice(x, 1, 1, 5); // columns 1..4
  EXPECT_EQ(a.shape(), (Shape{4, 4}));
  EXPECT_EQ(a.strides(), (Shape{6, 1}));
  EXPECT_FALSE(a.is_contiguous());
  EXPECT_TRUE(matches(a, Shape{4, 4}, DType::f32, gather(base, {4, 4}, {6, 1}, 1)));

  Tensor b = kiln::slice(x, 1, 0, 6, 2); // columns 0, 2, 4
  EXPECT_EQ(b.shape(), (Shape{4, 3}));
  EXPECT_EQ(b.strides(), (Shape{6, 2}));
  EXPECT_TRUE(matches(b, Shape{4, 3}, DType::f32, gather(base, {4, 3}, {6, 2}, 0)));

  Tensor c = kiln::slice(x, 0, -3, -1); // rows 1, 2
  EXPECT_EQ(c.shape(), (Shape{2, 6}));
  EXPECT_TRUE(matches(c, Shape{2, 6}, DType::f32, gather(base, {2, 6}, {6, 1}, 6)));

  Tensor d = kiln::slice(x, -1, 1, 100, 3); // columns 1, 4 (stop clamped)
  EXPECT_EQ(d.shape(), (Shape{4, 2}));
  EXPECT_TRUE(matches(d, Shape{4, 2}, DType::f32, gather(base, {4, 2}, {6, 3}, 1)));

  Tensor e = kiln::slice(x, 0, -100, 2); // start clamped to 0
  EXPECT_TRUE(matches(e, Shape{2, 6}, DType::f32, gather(base, {2, 6}, {6, 1}, 0)));

  Tensor f = kiln::slice(x, 0, 3, 1); // start >= stop: empty
  EXPECT_EQ(f.shape(), (Shape{0, 6}));
  EXPECT_TRUE(f.to_vector<double>().empty());

  Tensor g = kiln::slice(x, 0, 1, 4, 2); // rows 1, 3
  EXPECT_TRUE(matches(g, Shape{2, 6}, DType::f32, gather(base, {2, 6}, {12, 1}, 6)));
}

TEST_F(Views, SliceOfSliceAndOfTranspose) {
  Tensor x = iota({6, 8});
  Vals base = iota_vals(48);
  Tensor s = kiln::slice(kiln::slice(x, 1, 1, 8, 2), 0, 1, 6, 2); // rows 1,3,5; cols 1,3,5,7
  EXPECT_EQ(s.shape(), (Shape{3, 4}));
  EXPECT_EQ(s.strides(), (Shape{16, 2}));
  EXPECT_TRUE(matches(s, Shape{3, 4}, DType::f32, gather(base, {3, 4}, {16, 2}, 9)));
  Tensor t = kiln::slice(kiln::transpose(x, 0, 1), 0, 2, 5); // (3, 6), strides (1, 8), offset 2
  EXPECT_TRUE(matches(t, Shape{3, 6}, DType::f32, gather(base, {3, 6}, {1, 8}, 2)));
}

TEST_F(Views, ExpandHasZeroStrides) {
  Tensor x = iota({3, 1});
  Tensor e = kiln::expand(x, {3, 4});
  EXPECT_EQ(e.shape(), (Shape{3, 4}));
  EXPECT_EQ(e.strides()[1], 0);
  EXPECT_FALSE(e.is_contiguous());
  EXPECT_TRUE(matches(e, Shape{3, 4}, DType::f32, gather(iota_vals(3), {3, 4}, {1, 0})));
  Tensor v = iota({4});
  Tensor e2 = kiln::expand(v, {2, 3, 4}); // new leading dims
  EXPECT_EQ(e2.strides()[0], 0);
  EXPECT_EQ(e2.strides()[1], 0);
  EXPECT_TRUE(matches(e2, Shape{2, 3, 4}, DType::f32, gather(iota_vals(4), {2, 3, 4}, {0, 0, 1})));
  Tensor e3 = kiln::expand(x, {2, -1, 5}); // -1 keeps the extent
  EXPECT_EQ(e3.shape(), (Shape{2, 3, 5}));
  EXPECT_TRUE(matches(e3, Shape{2, 3, 5}, DType::f32, gather(iota_vals(3), {2, 3, 5}, {0, 1, 0})));
}

TEST_F(Views, FlattenMergesARangeOfDims) {
  Tensor x = iota({2, 3, 4});
  EXPECT_TRUE(matches(kiln::flatten(x), Shape{24}, DType::f32, iota_vals(24)));
  EXPECT_EQ(kiln::flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(kiln::flatten(x, 0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(kiln::flatten(x, -2, -1).shape(), (Shape{2, 12}));
  EXPECT_EQ(kiln::flatten(x, 1, 1).shape(), (Shape{2, 3, 4})); // one dim: unchanged
  EXPECT_TRUE(matches(kiln::flatten(x, 0, 1), Shape{6, 4}, DType::f32, iota_vals(24)));
  // A contiguous input stays a view; a transposed one is copied in its order, as reshape.
  EXPECT_TRUE(kiln::flatten(x, 1).is_contiguous());
  Tensor t = kiln::transpose(iota({3, 4}), 0, 1);
  EXPECT_TRUE(
      matches(kiln::flatten(t), Shape{12}, DType::f32, gather(iota_vals(12), {4, 3}, {1, 4})));
  // 0-d: one element, as torch.flatten.
  Tensor s = kiln::reshape(iota({1}), Shape{});
  EXPECT_EQ(kiln::flatten(s).shape(), (Shape{1}));
  EXPECT_KILN_ERROR("[flatten]", kiln::flatten(x, 3));
  EXPECT_KILN_ERROR("[flatten]", kiln::flatten(x, 2, 1));
  EXPECT_KILN_ERROR("[flatten]", kiln::flatten(s, 1));
}

TEST_F(Views, UnsqueezeSqueeze) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(kiln::unsqueeze(x, 0).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(kiln::unsqueeze(x, 1).shape(), (Shape{3, 1, 4}));
  EXPECT_EQ(kiln::unsqueeze(x, 2).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(kiln::unsqueeze(x, -1).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(kiln::unsqueeze(x, -3).shape(), (Shape{1, 3, 4}));
  EXPECT_TRUE(matches(kiln::unsqueeze(x, 1), Shape{3, 1, 4}, DType::f32, iota_vals(12)));

  Tensor y = iota({1, 3, 1, 4, 1});
  EXPECT_EQ(kiln::squeeze(y).shape(), (Shape{3, 4}));
  EXPECT_EQ(kiln::squeeze(y, 0).shape(), (Shape{3, 1, 4, 1}));
  EXPECT_EQ(kiln::squeeze(y, 2).shape(), (Shape{1, 3, 4, 1}));
  EXPECT_EQ(kiln::squeeze(y, -1).shape(), (Shape{1, 3, 1, 4}));
  // Squeezing a dim that is not 1 is a no-op (torch.squeeze).
  EXPECT_EQ(kiln::squeeze(y, 1).shape(), (Shape{1, 3, 1, 4, 1}));
  EXPECT_TRUE(matches(kiln::squeeze(y), Shape{3, 4}, DType::f32, iota_vals(12)));
  Tensor one = iota({1, 1});
  EXPECT_EQ(kiln::squeeze(one).shape(), Shape{});
  EXPECT_EQ(kiln::squeeze(one).item<float>(), 1.0f);
}

TEST_F(Views, ChunkLikeTorch) {
  Tensor x = iota({10});
  auto cs = kiln::chunk(x, 3); // 4, 4, 2
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_TRUE(matches(cs[0], Shape{4}, DType::f32, {1, 2, 3, 4}));
  EXPECT_TRUE(matches(cs[1], Shape{4}, DType::f32, {5, 6, 7, 8}));
  EXPECT_TRUE(matches(cs[2], Shape{2}, DType::f32, {9, 10}));
  auto c6 = kiln::chunk(iota({6}), 4); // torch.chunk gives 3 chunks of 2
  ASSERT_EQ(c6.size(), 3u);
  for (auto& c : c6) EXPECT_EQ(c.shape(), (Shape{2}));
  auto c2 = kiln::chunk(iota({3, 4}), 2, 1);
  ASSERT_EQ(c2.size(), 2u);
  EXPECT_TRUE(matches(c2[0], Shape{3, 2}, DType::f32, {1, 2, 5, 6, 9, 10}));
  EXPECT_TRUE(matches(c2[1], Shape{3, 2}, DType::f32, {3, 4, 7, 8, 11, 12}));
  auto cneg = kiln::chunk(iota({3, 4}), 2, -1);
  ASSERT_EQ(cneg.size(), 2u);
  EXPECT_TRUE(matches(cneg[1], Shape{3, 2}, DType::f32, {3, 4, 7, 8, 11, 12}));
}

TEST_F(Views, SplitBySizeAndSizes) {
  auto s = kiln::split(iota({10}), 3);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_TRUE(matches(s[0], Shape{3}, DType::f32, {1, 2, 3}));
  EXPECT_TRUE(matches(s[2], Shape{3}, DType::f32, {7, 8, 9}));
  EXPECT_TRUE(matches(s[3], Shape{1}, DType::f32, {10}));
  auto t = kiln::split(iota({4, 5}), std::vector<int64_t>{2, 3}, 1);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_TRUE(matches(t[0], Shape{4, 2}, DType::f32, {1, 2, 6, 7, 11, 12, 16, 17}));
  EXPECT_TRUE(matches(t[1], Shape{4, 3}, DType::f32, {3, 4, 5, 8, 9, 10, 13, 14, 15, 18, 19, 20}));
  auto u = kiln::split(iota({4, 5}), std::vector<int64_t>{1, 3}, 0);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[1].shape(), (Shape{3, 5}));
  EXPECT_EQ(u[1].to_vector<double>()[0], 6);
  // An empty extent splits into one empty piece, as torch.split and torch.chunk do.
  auto e = kiln::split(kiln::zeros({0, 3}), 2);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].shape(), (Shape{0, 3}));
  auto ce = kiln::chunk(kiln::zeros({3, 0}), 2, 1);
  ASSERT_EQ(ce.size(), 1u);
  EXPECT_EQ(ce[0].shape(), (Shape{3, 0}));
}

TEST_F(Views, ContiguousCopiesOnlyWhenNeeded) {
  Tensor x = iota({3, 4});
  Tensor same = kiln::contiguous(x);
  EXPECT_EQ(same.node(), x.node()) << "contiguous() of a contiguous tensor returns it";
  EXPECT_EQ(x.contiguous().node(), x.node());
  Tensor t = kiln::transpose(x, 0, 1);
  Tensor c = kiln::contiguous(t);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (Shape{3, 1}));
  EXPECT_TRUE(matches(c, Shape{4, 3}, DType::f32, gather(iota_vals(12), {4, 3}, {1, 4})));
  Tensor c2 = kiln::slice(x, 1, 0, 4, 2).contiguous();
  EXPECT_TRUE(c2.is_contiguous());
  EXPECT_TRUE(matches(c2, Shape{3, 2}, DType::f32, {1, 3, 5, 7, 9, 11}));
}

TEST_F(Views, ViewsOfPendingValues) {
  Rng rng;
  Vals a = rng.uniform(12, DType::f32, -2, 2);
  Tensor x = make(a, Shape{3, 4}, DType::f32);
  Tensor y = x * 2 + 1; // pending
  Tensor t = kiln::transpose(y, 0, 1);
  Vals ya = ref_unary(a, [](double v) { return v * 2 + 1; });
  EXPECT_TRUE(matches(t, Shape{4, 3}, DType::f32, gather(ya, {4, 3}, {1, 4})));
  Tensor s = kiln::slice(x * x, 1, 1, 4, 2);
  Vals xx = ref_unary(a, [](double v) { return v * v; });
  EXPECT_TRUE(matches(s, Shape{3, 2}, DType::f32, gather(xx, {3, 2}, {4, 2}, 1)));
}

TEST_F(Views, NonContiguousInputsInElementwiseChains) {
  Rng rng;
  Vals a = rng.uniform(20, DType::f32, -2, 2); // (4, 5)
  Vals b = rng.uniform(40, DType::f32, -2, 2); // (5, 8)
  Vals c = rng.uniform(4, DType::f32, 0.5, 2); // (4, 1)
  Tensor x = make(a, Shape{4, 5}, DType::f32);
  Tensor y = make(b, Shape{5, 8}, DType::f32);
  Tensor z = make(c, Shape{4, 1}, DType::f32);
  Tensor yt = kiln::slice(kiln::transpose(y, 0, 1), 0, 0, 8, 2); // (4, 5): y[j][2i]
  Tensor ze = kiln::expand(z, {4, 5});
  Tensor r = kiln::exp(x) * yt - ze / (kiln::abs(yt) + 1);
  Vals e(20);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      double ytv = b[j * 8 + 2 * i];
      e[i * 5 + j] = std::exp(a[i * 5 + j]) * ytv - c[i] / (std::fabs(ytv) + 1);
    }
  EXPECT_TRUE(matches(r, Shape{4, 5}, DType::f32, e));
  // The same through a reduction.
  Tensor sm = kiln::sum(yt, {1});
  Vals es(4, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) es[i] += b[j * 8 + 2 * i];
  EXPECT_TRUE(matches(sm, Shape{4}, DType::f32, es));
}

TEST_F(Views, Concat) {
  Tensor a = iota({2, 3});
  Tensor b = make({10, 20, 30}, Shape{1, 3}, DType::f32);
  Tensor c = kiln::concat({a, b}, 0);
  EXPECT_TRUE(matches(c, Shape{3, 3}, DType::f32, {1, 2, 3, 4, 5, 6, 10, 20, 30}));
  Tensor d = make({7, 8}, Shape{2, 1}, DType::f32);
  EXPECT_TRUE(matches(kiln::concat({a, d, a}, 1), Shape{2, 7}, DType::f32,
                      {1, 2, 3, 7, 1, 2, 3, 4, 5, 6, 8, 4, 5, 6}));
  EXPECT_TRUE(matches(kiln::concat({d, a}, -1), Shape{2, 4}, DType::f32, {7, 1, 2, 3, 8, 4, 5, 6}));
  // Non-contiguous and pending pieces.
  Tensor t = kiln::transpose(iota({3, 2}), 0, 1); // (2, 3): [[1,3,5],[2,4,6]]
  Tensor p = a * 2;
  EXPECT_TRUE(matches(kiln::concat({t, p}, 0), Shape{4, 3}, DType::f32,
                      {1, 3, 5, 2, 4, 6, 2, 4, 6, 8, 10, 12}));
  Tensor single = kiln::concat({a}, 0);
  EXPECT_TRUE(matches(single, Shape{2, 3}, DType::f32, iota_vals(6)));
  // Result is a new contiguous tensor.
  EXPECT_TRUE(c.is_contiguous());
}

TEST_F(Views, ConcatIntsAndChunkRoundTrip) {
  Rng rng;
  Vals v = rng.uniform(30, DType::i64, -1000, 1000);
  Tensor x = make(v, Shape{5, 6}, DType::i64);
  auto parts = kiln::chunk(x, 3, 1);
  Tensor back = kiln::concat(parts, 1);
  EXPECT_TRUE(matches(back, Shape{5, 6}, DType::i64, v));
  auto rows = kiln::split(x, 2, 0);
  EXPECT_TRUE(matches(kiln::concat(rows, 0), Shape{5, 6}, DType::i64, v));
}

TEST_F(Views, ReductionsOverExpandedViews) {
  Rng rng;
  Vals a = rng.uniform(4, DType::f64, -2, 2);
  Tensor x = make(a, Shape{4, 1}, DType::f64);
  Tensor e = kiln::expand(x, {3, 4, 5}); // stride-0 dims
  EXPECT_TRUE(matches(kiln::sum(e, {0, 2}), Shape{4}, DType::f64,
                      ref_unary(a, [](double v) { return 15 * v; })));
  EXPECT_TRUE(matches(kiln::max(e, {1}), Shape{3, 5}, DType::f64,
                      Vals(15, *std::max_element(a.begin(), a.end()))));
  EXPECT_TRUE(
      matches(kiln::contiguous(e), Shape{3, 4, 5}, DType::f64, gather(a, {3, 4, 5}, {0, 1, 0})));
  EXPECT_TRUE(kiln::contiguous(e).is_contiguous());
  EXPECT_TRUE(matches(kiln::reshape(e, {12, 5}), Shape{12, 5}, DType::f64,
                      gather(a, {3, 4, 5}, {0, 1, 0})));
}

TEST_F(Views, ViewOutlivesItsBaseHandle) {
  Rng rng;
  Vals a = rng.uniform(12, DType::f32, -2, 2);
  Tensor t, s;
  {
    Tensor x = make(a, Shape{3, 4}, DType::f32);
    Tensor y = x * 3; // pending; its handle dies at the end of this scope
    t = kiln::transpose(y, 0, 1);
    s = kiln::slice(x, 1, 1, 3);
  }
  Vals y3 = ref_unary(a, [](double v) { return v * 3; });
  EXPECT_TRUE(matches(t, Shape{4, 3}, DType::f32, gather(y3, {4, 3}, {1, 4})));
  EXPECT_TRUE(matches(s, Shape{3, 2}, DType::f32, gather(a, {3, 2}, {4, 1}, 1)));
}

TEST_F(Views, ReshapeOfPendingTransposeAndSlicedReshapeView) {
  Rng rng;
  Vals a = rng.uniform(24, DType::f32, -2, 2);
  Tensor x = make(a, Shape{4, 6}, DType::f32);
  Tensor r = kiln::reshape(kiln::transpose(x + 1, 0, 1), {3, 8}); // copy of a pending view
  Vals a1 = ref_unary(a, [](double v) { return v + 1; });
  EXPECT_TRUE(matches(r, Shape{3, 8}, DType::f32, gather(a1, {6, 4}, {1, 6})));
  // Rows 1..3 of a contiguous tensor are contiguous: reshape stays a view.
  Tensor rows = kiln::slice(x, 0, 1, 3);
  EXPECT_TRUE(rows.is_contiguous());
  Tensor rr = kiln::reshape(rows, {3, 4});
  EXPECT_TRUE(matches(rr, Shape{3, 4}, DType::f32, gather(a, {12}, {1}, 6)));
}

TEST_F(Views, ToVectorAndItemConvertLikeAstype) {
  Tensor x = make({3.7, -3.7, 0.5, 1e6}, Shape{4}, DType::f32);
  EXPECT_EQ(x.to_vector<int32_t>(), (std::vector<int32_t>{3, -3, 0, 1000000}));
  EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{3, -3, 0, 1000000}));
  EXPECT_EQ(kiln::slice(x, 0, 1, 2).item<int32_t>(), -3);
  Tensor h = make({0.1, 2049}, Shape{2}, DType::f32);
  std::vector<kiln::half> hv = h.to_vector<kiln::half>();
  EXPECT_EQ(hv[0].bits, half_bits(quantize(DType::f16, static_cast<float>(0.1))));
  EXPECT_EQ(static_cast<float>(hv[1]), 2048.0f); // ties to even
  Tensor t = kiln::transpose(make({1, 2, 3, 4, 5, 6}, Shape{2, 3}, DType::i32), 0, 1);
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}))
      << "to_vector of a view is in the view's row-major order";
}

} // namespace
