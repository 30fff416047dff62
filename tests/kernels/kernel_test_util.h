// Helpers shared by the kernel tests: seeded random arrays, central-difference gradients
// and element-wise comparison with a relative tolerance plus an absolute floor.
#pragma once

#include <QString>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

// Fails the current test with the message when `expr` (a QString) is not empty.
#define LOOM_VERIFY_EMPTY(expr)                     \
  do {                                              \
    const QString loom_err_ = (expr);               \
    QVERIFY2(loom_err_.isEmpty(), qPrintable(loom_err_)); \
  } while (0)

namespace loom::test {

template <class T>
std::vector<T> random_vector(std::size_t n, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) e = T(dist(rng));
  return v;
}

// Values bounded away from zero (|v| in [0.1, 1]) so ReLU-like kinks are never crossed by
// a finite-difference step.
inline std::vector<double> away_from_zero(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mag(0.1, 1.0);
  std::bernoulli_distribution sign(0.5);
  std::vector<double> v(n);
  for (auto& e : v) e = sign(rng) ? mag(rng) : -mag(rng);
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// d objective / d v[i] by central differences; v is restored afterwards.
inline std::vector<double> numeric_grad(std::vector<double>& v, const std::function<double()>& objective,
                                        double eps = 1e-6) {
  std::vector<double> g(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double saved = v[i];
    v[i] = saved + eps;
    const double up = objective();
    v[i] = saved - eps;
    const double down = objective();
    v[i] = saved;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

// Empty when every |got - want| <= rel * |want| + abs_floor; otherwise says where it failed.
template <class A, class B>
QString compare(const std::vector<A>& got, const std::vector<B>& want, double rel, double abs_floor,
                const char* what) {
  if (got.size() != want.size()) return QString("%1: size %2 vs %3").arg(what).arg(got.size()).arg(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), w = double(want[i]);
    if (!(std::abs(g - w) <= rel * std::abs(w) + abs_floor))
      return QString("%1[%2]: got %3, want %4 (rel %5, floor %6)")
          .arg(what).arg(i).arg(g, 0, 'g', 17).arg(w, 0, 'g', 17).arg(rel).arg(abs_floor);
  }
  return {};
}

// Normwise: max|got - want| <= rel * max|want|. Suits float GEMM results, whose rounding
// error scales with the magnitude of the whole dot product, not of each (possibly
// cancelled) element.
template <class T>
QString compare_normwise(const std::vector<T>& got, const std::vector<T>& want, double rel, const char* what) {
  double scale = 0, worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(double(want[i])));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double e = std::abs(double(got[i]) - double(want[i]));
    if (!(e <= worst)) { worst = e; at = i; }
  }
  if (got.size() != want.size() || !(worst <= rel * std::max(scale, 1e-30)))
    return QString("%1: max error %2 at [%3] vs scale %4 (rel %5)").arg(what).arg(worst).arg(at).arg(scale).arg(rel);
  return {};
}

// For sums in float: empty when every |got - exact| <= additions * 2^-24 * magnitude[i],
// the first-order bound of a float sum whose longest chain of roundings has `additions`
// additions (exact and magnitude = sum of |terms| in float64).
inline QString compare_sum(const std::vector<float>& got, const std::vector<double>& exact,
                           const std::vector<double>& magnitude, double additions, const char* what) {
  if (got.size() != exact.size()) return QString("%1: size %2 vs %3").arg(what).arg(got.size()).arg(exact.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = additions * std::ldexp(1.0, -24) * magnitude[i];
    if (!(std::abs(double(got[i]) - exact[i]) <= bound))
      return QString("%1[%2]: got %3, float64 sum %4 (bound %5)")
          .arg(what).arg(i).arg(double(got[i]), 0, 'g', 17).arg(exact[i], 0, 'g', 17).arg(bound);
  }
  return {};
}

}  // namespace loom::test
