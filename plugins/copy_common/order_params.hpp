// SPDX-License-Identifier: Apache-2.0
// Order parameters of an attention matrix A (L x L, row-major; for softmax A is after the softmax)
// and of an ensemble of them (seeds or posterior samples). Definitions: docs/copy-task.md.
#pragma once

#include <cstddef>
#include <vector>

namespace pl::copy {

struct OrderParams {
  double D = 0;          // sum_l A[l, l-1 mod L]: overlap with the shift S
  double T = 0;          // sum of all entries
  double Q = 0;          // ||A||_F^2
  double rowsum_sq = 0;  // sum_l s_l^2, s_l = row sums
  double c1 = 0;         // least-squares coordinates in span{J/L, S}: A ~ c1 J/L + cG S
  double cG = 0;
  double c1_hat = 0;  // orthonormal coordinates: <A, J/L> = T/L and <A, (S - J/L)/sqrt(L-1)>
  double cG_hat = 0;
  double coverage = 0;  // (c1_hat^2 + cG_hat^2) / Q: share of ||A||^2 inside the plane
};

OrderParams order_params(const float* A, int L);
OrderParams order_params(const double* A, int L);
// Row sums s_l (size L).
std::vector<double> row_sums(const float* A, int L);

// Circulant spectrum c_k = (1/L) sum_l A[l, (l - k) mod L], k = 0..L-1 (copy: c_1 = 1).
std::vector<double> circulant_spectrum(const float* A, int L);
std::vector<double> circulant_spectrum(const double* A, int L);

struct EnsembleCoverage {
  double coverage = 0;    // share of the variance of vec(A - mean A) inside span{J/L, S}
  double pca2_share = 0;  // share of the two leading principal components
  double total_var = 0;   // sum over samples of ||A - mean A||^2 / n
};
// members: n matrices of L*L entries each, stored one after another (row-major). Needs n >= 2
// (else all zero).
EnsembleCoverage ensemble_coverage(const double* members, size_t n, int L);

}  // namespace pl::copy
