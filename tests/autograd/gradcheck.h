#pragma once
// Gradient checks: kiln::grad against central finite differences, in f64.
#include "tests/ops/reference.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace kt_grad {

using Fn = std::function<kiln::Tensor(const std::vector<kiln::Tensor>&)>;

/// sum(f(xs) * weights): a scalar whose gradient feeds f's output a different weight per
/// element, so a rule that mixes up output elements is caught.
inline kiln::Tensor weighted(const Fn& f, const std::vector<kiln::Tensor>& xs) {
  kiln::Tensor y = f(xs);
  const int64_t n = y.numel();
  kiln::Tensor w = kiln::reshape(kiln::arange(n, kiln::DType::f64) * 0.37 + 1.0, y.shape());
  return kiln::sum(y.astype(kiln::DType::f64) * w);
}

/// f64 values: uniform in [lo, hi), or with `away` in +-[away, hi) (away from the kinks of abs,
/// relu and clamp, and from 0 where an op has a pole).
inline kiln::Tensor input(const kiln::Shape& s, double lo, double hi, double away = 0) {
  kiln::Tensor u = kiln::rand(s, kiln::DType::f64);
  if (away <= 0) return (u * (hi - lo) + lo).contiguous();
  kiln::Tensor mag = kiln::rand(s, kiln::DType::f64) * (hi - away) + away;
  return kiln::where(u < 0.5, -mag, mag).contiguous();
}

/// Checks every element of every input's gradient against (f(x+h) - f(x-h)) / 2h.
inline ::testing::AssertionResult
matches_finite_differences(const Fn& f, const std::vector<kiln::Tensor>& xs, double tol = 1e-6) {
  using namespace kiln;
  // Pending leaves, and realized ones (parameters after a step): views of a realized value
  // are realized aliases, recorded on a different path.
  std::vector<Tensor> leaves, realized;
  for (const Tensor& x : xs) {
    leaves.push_back(x.detach().requires_grad_());
    realized.push_back(x.contiguous().detach().requires_grad_());
  }
  eval(realized);
  std::vector<Tensor> analytic = grad(weighted(f, leaves), leaves);
  std::vector<Tensor> from_realized = grad(weighted(f, realized), realized);
  NoGradGuard no_grad;
  for (size_t i = 0; i < xs.size(); ++i)
    if (analytic[i].to_vector<double>() != from_realized[i].to_vector<double>())
      return ::testing::AssertionFailure()
             << "input " << i << ": the gradient differs between pending and realized inputs";
  const double h = 1e-6;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (analytic[i].shape() != xs[i].shape() || analytic[i].dtype() != xs[i].dtype())
      return ::testing::AssertionFailure()
             << "input " << i << ": gradient has shape " << analytic[i].shape().str() << " "
             << dtype_name(analytic[i].dtype()) << ", the input " << xs[i].shape().str();
    const std::vector<double> a = analytic[i].to_vector<double>();
    const std::vector<double> x = xs[i].to_vector<double>();
    for (size_t j = 0; j < x.size(); ++j) {
      auto at = [&](double delta) {
        std::vector<double> v = x;
        v[j] += delta;
        std::vector<Tensor> args = xs;
        args[i] = from_vector(v, xs[i].shape(), xs[i].device());
        return weighted(f, args).item<double>();
      };
      const double numeric = (at(h) - at(-h)) / (2 * h);
      if (!(std::abs(a[j] - numeric) <= tol * std::max(1.0, std::abs(numeric))))
        return ::testing::AssertionFailure() << "input " << i << " element " << j << ": grad "
                                             << a[j] << ", finite difference " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

} // namespace kt_grad
