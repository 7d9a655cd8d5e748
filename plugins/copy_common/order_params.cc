// SPDX-License-Identifier: Apache-2.0
#include "copy_common/order_params.hpp"

#include <algorithm>
#include <cmath>

namespace pl::copy {
namespace {

template <typename R>
OrderParams order_params_t(const R* A, int L) {
  OrderParams o;
  for (int l = 0; l < L; ++l) {
    double s = 0;
    for (int j = 0; j < L; ++j) {
      const double a = A[size_t(l) * L + j];
      s += a;
      o.Q += a * a;
    }
    o.T += s;
    o.rowsum_sq += s * s;
    o.D += A[size_t(l) * L + (l + L - 1) % L];
  }
  const double Ld = L;
  // Normal equations of min ||A - c1 J/L - cG S||^2 with <J/L,J/L> = 1, <J/L,S> = 1, <S,S> = L.
  o.cG = (o.D - o.T / Ld) / (Ld - 1);
  o.c1 = (o.T - o.D) / (Ld - 1);
  o.c1_hat = o.T / Ld;
  o.cG_hat = (o.D - o.T / Ld) / std::sqrt(Ld - 1);
  o.coverage = o.Q > 0 ? (o.c1_hat * o.c1_hat + o.cG_hat * o.cG_hat) / o.Q : 0.0;
  return o;
}

template <typename R>
std::vector<double> spectrum_t(const R* A, int L) {
  std::vector<double> c(L, 0.0);
  for (int k = 0; k < L; ++k) {
    double s = 0;
    for (int l = 0; l < L; ++l) s += A[size_t(l) * L + (l - k + L) % L];
    c[k] = s / L;
  }
  return c;
}

}  // namespace

OrderParams order_params(const float* A, int L) { return order_params_t(A, L); }
OrderParams order_params(const double* A, int L) { return order_params_t(A, L); }

std::vector<double> row_sums(const float* A, int L) {
  std::vector<double> s(L, 0.0);
  for (int l = 0; l < L; ++l)
    for (int j = 0; j < L; ++j) s[l] += A[size_t(l) * L + j];
  return s;
}

std::vector<double> circulant_spectrum(const float* A, int L) { return spectrum_t(A, L); }
std::vector<double> circulant_spectrum(const double* A, int L) { return spectrum_t(A, L); }

EnsembleCoverage ensemble_coverage(const double* members, size_t n, int L) {
  EnsembleCoverage out;
  const size_t d = size_t(L) * L;
  if (n < 2) return out;
  std::vector<double> mean(d, 0.0);
  for (size_t s = 0; s < n; ++s)
    for (size_t i = 0; i < d; ++i) mean[i] += members[s * d + i] / double(n);
  // dev: n x d, centred members.
  std::vector<double> dev(n * d);
  double total = 0, inplane = 0;
  const double inv = 1.0 / std::sqrt(double(L) - 1);
  for (size_t s = 0; s < n; ++s) {
    double T = 0, D = 0;
    for (size_t i = 0; i < d; ++i) {
      const double x = members[s * d + i] - mean[i];
      dev[s * d + i] = x;
      total += x * x;
      T += x;
    }
    for (int l = 0; l < L; ++l) D += dev[s * d + size_t(l) * L + (l + L - 1) % L];
    const double p1 = T / L, pG = (D - T / L) * inv;
    inplane += p1 * p1 + pG * pG;
  }
  out.total_var = total / double(n);
  if (total <= 0) return out;
  out.coverage = inplane / total;

  // Top-2 principal components: orthogonal (subspace) iteration with k = 4 vectors on the
  // d x d covariance applied implicitly as dev^T (dev x); the top-2 eigenvalues are the Rayleigh
  // quotients of the converged basis. Deterministic start vectors.
  const int k = int(std::min<size_t>(4, std::min(n, d)));
  std::vector<double> Z(size_t(k) * d), Y(size_t(k) * d), t(n);
  for (int j = 0; j < k; ++j)
    for (size_t i = 0; i < d; ++i) Z[j * d + i] = std::sin(1.0 + 0.7 * double(i) * (j + 1) + j);
  auto orthonormalise = [&](std::vector<double>& B) {
    for (int j = 0; j < k; ++j) {
      for (int q = 0; q < j; ++q) {
        double dp = 0;
        for (size_t i = 0; i < d; ++i) dp += B[j * d + i] * B[q * d + i];
        for (size_t i = 0; i < d; ++i) B[j * d + i] -= dp * B[q * d + i];
      }
      double nr = 0;
      for (size_t i = 0; i < d; ++i) nr += B[j * d + i] * B[j * d + i];
      nr = std::sqrt(nr);
      for (size_t i = 0; i < d; ++i) B[j * d + i] = nr > 0 ? B[j * d + i] / nr : 0.0;
    }
  };
  auto apply = [&](const double* z, double* y) {  // y = dev^T dev z
    for (size_t s = 0; s < n; ++s) {
      double a = 0;
      for (size_t i = 0; i < d; ++i) a += dev[s * d + i] * z[i];
      t[s] = a;
    }
    std::fill(y, y + d, 0.0);
    for (size_t s = 0; s < n; ++s)
      for (size_t i = 0; i < d; ++i) y[i] += t[s] * dev[s * d + i];
  };
  orthonormalise(Z);
  std::vector<double> ev(k, 0.0);
  for (int it = 0; it < 300; ++it) {
    for (int j = 0; j < k; ++j) apply(&Z[j * d], &Y[j * d]);
    std::vector<double> prev = ev;
    for (int j = 0; j < k; ++j) {
      double r = 0;
      for (size_t i = 0; i < d; ++i) r += Z[j * d + i] * Y[j * d + i];
      ev[j] = r;
    }
    Z.swap(Y);
    orthonormalise(Z);
    double change = 0;
    for (int j = 0; j < k; ++j) change += std::fabs(ev[j] - prev[j]);
    if (it > 5 && change <= 1e-12 * total) break;
  }
  std::sort(ev.begin(), ev.end(), [](double a, double b) { return a > b; });
  double top2 = 0;
  for (int j = 0; j < std::min(k, 2); ++j) top2 += ev[j];
  out.pca2_share = std::min(1.0, top2 / total);
  return out;
}

}  // namespace pl::copy
