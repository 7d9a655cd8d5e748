// SPDX-License-Identifier: Apache-2.0
// layernorm.scalar, layernorm_bwd.scalar: the references, in double, rounded once.
#include <cmath>
#include <vector>

#include "phaselab/kernels.hpp"

namespace pl::scalar {

// x, y: rows x d; gamma, beta: d; mean, rstd: rows.
// y = (x - mean) rstd gamma + beta, rstd = 1 / sqrt(var + eps), var the biased row variance.
void Layernorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, size_t rows, size_t d, float eps) {
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    double m = 0;
    for (size_t j = 0; j < d; ++j) m += xr[j];
    m /= double(d);
    double var = 0;  // two passes: no cancellation when |mean| >> std
    for (size_t j = 0; j < d; ++j) var += (xr[j] - m) * (xr[j] - m);
    var /= double(d);
    const double rs = 1 / std::sqrt(var + eps);
    mean[r] = float(m);
    rstd[r] = float(rs);
    for (size_t j = 0; j < d; ++j) y[r * d + j] = float((xr[j] - m) * rs * gamma[j] + beta[j]);
  }
}

// dy, x, dx: rows x d; gamma, dgamma, dbeta: d; mean, rstd: rows (from the forward pass).
// With xhat = (x - mean) rstd and g = dy .* gamma, per row:
//   dx += rstd (g - mean_j(g) - xhat mean_j(g xhat)),  dgamma += dy xhat,  dbeta += dy.
void LayernormBwd(const float* dy, const float* x, const float* gamma, const float* mean,
                  const float* rstd, float* dx, float* dgamma, float* dbeta, size_t rows,
                  size_t d) {
  std::vector<double> dg(d, 0.0), db(d, 0.0);  // summed over rows, added once
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    const float* dyr = dy + r * d;
    const double m = mean[r], rs = rstd[r];
    double mean_g = 0, mean_gx = 0;
    for (size_t j = 0; j < d; ++j) {
      const double xhat = (xr[j] - m) * rs, g = double(dyr[j]) * gamma[j];
      mean_g += g;
      mean_gx += g * xhat;
      dg[j] += double(dyr[j]) * xhat;
      db[j] += dyr[j];
    }
    mean_g /= double(d);
    mean_gx /= double(d);
    for (size_t j = 0; j < d; ++j) {
      const double xhat = (xr[j] - m) * rs, g = double(dyr[j]) * gamma[j];
      dx[r * d + j] = float(dx[r * d + j] + rs * (g - mean_g - xhat * mean_gx));
    }
  }
  for (size_t j = 0; j < d; ++j) {
    dgamma[j] = float(dgamma[j] + dg[j]);
    dbeta[j] = float(dbeta[j] + db[j]);
  }
}

}  // namespace pl::scalar
