// SPDX-License-Identifier: Apache-2.0
// Circuit probes of the Markov model (docs/circuits.md): probe sets with the five Bayes
// predictors, head scores, the phase metric of any (hooked) run, ablations, path patching under
// four corruptions, and task-vector separability. Everything here is deterministic and plain;
// the plugin (circuits.cc) only sequences it and writes the tables.
#pragma once

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "markov_common/chains.hpp"
#include "markov_common/hooked.hpp"
#include "markov_common/predictors.hpp"

namespace pl::markov::circuits {

// ------------------------------------------------------------------ head scores
// For one layer's pattern (nb x H x N x N) on sequences seq (nb x (N + 1)):
//   previous-token score: mean over sequences, heads and positions t >= 1 of P[t, t-1]; the
//     same over the early window 1 <= t < kEarlyEnd and over the late window t >= N/2;
//   induction score: mean over sequences, heads and positions t with at least one earlier
//     match of sum over m in [1, t] with x_{m-1} = x_t of P[t, m];
// each beside the same quantity for uniform causal attention (1/(t+1) per key). The enrichment
// of a score is score / uniform: 1 for attention that ignores the tokens and positions.
constexpr int kEarlyEnd = 8;  // early window: positions 1 <= t < kEarlyEnd
struct HeadScores {
  double prev = 0, prev_uniform = 0, induction = 0, induction_uniform = 0;
  double prev_early = 0, prev_early_uniform = 0, prev_late = 0, prev_late_uniform = 0;
};
// score / baseline (NaN when the baseline is 0: an empty window).
inline double enrichment(double score, double baseline) {
  return baseline > 0 ? score / baseline : NAN;
}
template <class T>
HeadScores head_scores(const ModelConfig& c, const int32_t* seq, int nb, const T* pattern) {
  const int N = c.N, H = c.heads, late = N / 2;
  double sp = 0, su = 0, si = 0, siu = 0, se = 0, seu = 0, sl = 0, slu = 0;
  int64_t np = 0, ni = 0, ne = 0, nl = 0;
  for (int b = 0; b < nb; ++b) {
    const int32_t* x = seq + size_t(b) * (N + 1);
    for (int h = 0; h < H; ++h) {
      const T* P = pattern + (size_t(b) * H + h) * N * N;
      for (int t = 1; t < N; ++t) {
        const double pt = double(P[size_t(t) * N + t - 1]), ut = 1.0 / (t + 1);
        sp += pt;
        su += ut;
        ++np;
        if (t < kEarlyEnd) se += pt, seu += ut, ++ne;
        if (t >= late) sl += pt, slu += ut, ++nl;
        double s = 0;
        int matches = 0;
        for (int m = 1; m <= t; ++m)
          if (x[m - 1] == x[t]) s += double(P[size_t(t) * N + m]), ++matches;
        if (matches) {
          si += s;
          siu += double(matches) / (t + 1);
          ++ni;
        }
      }
    }
  }
  HeadScores r;
  if (np) r.prev = sp / double(np), r.prev_uniform = su / double(np);
  if (ni) r.induction = si / double(ni), r.induction_uniform = siu / double(ni);
  if (ne) r.prev_early = se / double(ne), r.prev_early_uniform = seu / double(ne);
  if (nl) r.prev_late = sl / double(nl), r.prev_late_uniform = slu / double(nl);
  return r;
}

// Head scores of every layer with layer 1's attention pattern replaced by uniform causal
// attention (the "A1 pattern uniform" ablation): what the later layers' scores are without any
// previous-token head. Layer 1's entry scores the uniform pattern itself (its baseline).
// `clean`: the run of the same sequences without hooks (its embedding is reused), or nullptr.
template <class T>
std::vector<HeadScores> head_scores_l1_uniform(const HookedModel<T>& hm, const ModelConfig& c,
                                               const int32_t* seq, int nb,
                                               const HookedCache<T>* clean = nullptr) {
  const std::vector<T> uni = uniform_pattern<T>(c, nb);
  Hooks<T> h;
  h.pattern[0] = uni.data();
  HookedCache<T> u;
  hm.run(seq, nb, h, u, clean);
  std::vector<HeadScores> out;
  for (int l = 0; l < c.layers; ++l)
    out.push_back(head_scores(c, seq, nb, u.pattern[size_t(l)].data()));
  return out;
}

// ------------------------------------------------------------------ probe steps
// The steps a trained model is probed at: 0, then n log-spaced steps round(steps^(i / (n - 1)))
// for i = 0..n-1, each moved to one past the step before where rounding would repeat it (the
// early steps, less than one step apart on the log scale, become consecutive: 1, 2, 3, ...).
// So every step asked is delivered: n + 1 steps ending at `steps` when n <= steps (every step
// 0..steps otherwise). markov_icl's checkpoint_steps drops the repeats instead (fewer steps).
inline std::vector<int64_t> probe_steps(int64_t steps, int n) {
  std::vector<int64_t> v = {0};
  for (int i = 0; i < n; ++i) {
    const double e = n > 1 ? double(i) / (n - 1) : 1.0;
    const int64_t s = std::max(int64_t(std::llround(std::pow(double(steps), e))), v.back() + 1);
    if (s > steps) break;
    v.push_back(s);
  }
  if (v.back() != steps) v.push_back(steps);
  return v;
}

// ------------------------------------------------------------------ probe sets
enum Corruption { kOtherChain = 0, kPermute = 1, kLastState = 2, kFreshChain = 3, kNumCorr = 4 };
inline const char* corruption_name(int c) {
  static const char* const n[] = {"other_chain", "permute", "last_state", "fresh_chain"};
  return n[c];
}

// n sequences of N + 1 states with their source chain (-1: a fresh chain), the predictors'
// q (n x N x kNumPred x C, double) and the corrupted copies. Every corruption keeps the last
// input state x_{N-1} and the target x_N, except kLastState, which changes only x_{N-1}:
//   kOtherChain  x_0..x_{N-2} from a sequence of another training chain (a fresh chain when
//                there is none: infinite K, or K = 1);
//   kPermute     x_0..x_{N-2} permuted uniformly (unigram counts kept, bigrams destroyed);
//   kLastState   x_{N-1} replaced by a uniformly drawn different state;
//   kFreshChain  x_0..x_{N-2} from a fresh chain of the ensemble.
struct ProbeSet {
  int n = 0, N = 0, C = 0;
  std::vector<int32_t> seq;  // n x (N + 1)
  std::vector<int> chain;    // n
  std::vector<double> q;     // n x N x kNumPred x C
  std::vector<int32_t> corrupt[kNumCorr];
};

// Builds a probe set from (seed, stream i) per sequence. train: the K training chains (ID set),
// or nullptr (OOD: a fresh chain per sequence). pred_chains: the chains the Mem predictors use
// (nullptr: Mem predictors undefined, NaN).
inline ProbeSet make_probe_set(const pl_kernel_table& k, int n, int N, int C, double alpha,
                               double alpha1, const Chains* train, const Chains* pred_chains,
                               uint64_t seed) {
  ProbeSet p;
  p.n = n, p.N = N, p.C = C;
  const size_t L = size_t(N) + 1;
  p.seq.assign(size_t(n) * L, 0);
  p.chain.assign(size_t(n), -1);
  p.q.assign(size_t(n) * N * kNumPred * C, 0.0);
  for (auto& c : p.corrupt) c.assign(size_t(n) * L, 0);
  tbb::parallel_for(0, n, [&](int i) {
    Rng r(k, seed, uint64_t(i));
    int32_t* x = p.seq.data() + size_t(i) * L;
    auto fresh = [&](int32_t* out, int len) {
      Chains f;
      f.resize(1, C);
      f.make(0, r, alpha);
      f.sample(0, r, len, out);
    };
    if (train && train->K > 0) {
      p.chain[size_t(i)] = int(r.below(uint64_t(train->K)));
      train->sample(p.chain[size_t(i)], r, int(L), x);
    } else {
      fresh(x, int(L));
    }
    PredictorScratch s;
    predict(pred_chains, x, N, C, alpha, alpha1, s, p.q.data() + size_t(i) * N * kNumPred * C);
    // corruptions
    std::vector<int32_t> tmp(L);
    for (int c = 0; c < kNumCorr; ++c) {
      int32_t* y = p.corrupt[c].data() + size_t(i) * L;
      std::copy(x, x + L, y);
      if (c == kOtherChain || c == kFreshChain) {
        if (c == kOtherChain && train && train->K > 1) {
          int k2 = int(r.below(uint64_t(train->K - 1)));
          if (k2 >= p.chain[size_t(i)]) ++k2;
          train->sample(k2, r, N - 1, tmp.data());
        } else {
          fresh(tmp.data(), N - 1);
        }
        std::copy(tmp.begin(), tmp.begin() + (N - 1), y);
      } else if (c == kPermute) {
        for (int j = N - 2; j > 0; --j) std::swap(y[j], y[r.below(uint64_t(j + 1))]);
      } else {
        const int v = int(r.below(uint64_t(C - 1)));
        y[N - 1] = v >= x[N - 1] ? v + 1 : v;
      }
    }
  });
  return p;
}

// ------------------------------------------------------------------ phase metric of a run
struct RunMetrics {
  double loss = 0;           // mean cross-entropy over all positions (targets of `targets`)
  double kl[kNumPred] = {};  // KL(q_A || p_net) averaged over sequences and positions
  double logp_last = 0;      // mean log p(x_N | x_0..x_{N-1}) at the last position
  int phase = 0;             // argmin of kl over the defined predictors
};
// logits: nb*N x C; targets: the clean sequences (nb x (N + 1)); q: the probe set's predictors.
template <class T>
RunMetrics run_metrics(const ModelConfig& c, const HookedCache<T>& run, const int32_t* targets,
                       const double* q, bool mem) {
  const int N = c.N, C = c.C, nb = run.nb;
  RunMetrics m;
  std::vector<double> lp(size_t(nb) * N * C);
  run.log_probs(C, lp.data());
  double loss = 0, last = 0, kl[kNumPred] = {};
  for (int b = 0; b < nb; ++b)
    for (int t = 0; t < N; ++t) {
      const double* l = lp.data() + (size_t(b) * N + t) * C;
      const int y = targets[size_t(b) * (N + 1) + t + 1];
      loss -= l[y];
      if (t == N - 1) last += l[y];
      for (int a = 0; a < kNumPred; ++a) {
        const double* qa = q + ((size_t(b) * N + t) * kNumPred + a) * C;
        double s = 0;
        for (int j = 0; j < C; ++j) s += qa[j] * (std::log(std::fmax(qa[j], 1e-8)) - l[j]);
        kl[a] += s;
      }
    }
  const double R = double(nb) * N;
  m.loss = loss / R;
  m.logp_last = last / nb;
  const int na = mem ? kNumPred : kMem2;
  for (int a = 0; a < kNumPred; ++a) m.kl[a] = a < na ? kl[a] / R : NAN;
  for (int a = 1; a < na; ++a)
    if (m.kl[a] < m.kl[m.phase]) m.phase = a;
  return m;
}

// Mean log p(target at the last position) of run, per sequence averaged.
template <class T>
double logp_last(const ModelConfig& c, const HookedCache<T>& run, const int32_t* targets) {
  const int N = c.N, C = c.C;
  double s = 0;
  for (int b = 0; b < run.nb; ++b) {
    const T* u = run.logits.data() + (size_t(b) * N + N - 1) * C;
    const LogSumExp z = logsumexp(u, size_t(C));
    s += double(u[targets[size_t(b) * (N + 1) + N]]) - z.max - z.log_sum;
  }
  return s / run.nb;
}

// ------------------------------------------------------------------ ablations
// Per-position mean of a component over the probe set (nb*N x d -> broadcast back to nb*N x d).
template <class T>
std::vector<T> position_mean(const ModelConfig& c, const std::vector<T>& v, int nb) {
  const size_t N = size_t(c.N), d = size_t(c.d);
  std::vector<double> m(N * d, 0.0);
  for (size_t b = 0; b < size_t(nb); ++b)
    for (size_t i = 0; i < N * d; ++i) m[i] += double(v[b * N * d + i]);
  std::vector<T> out(v.size());
  for (size_t b = 0; b < size_t(nb); ++b)
    for (size_t i = 0; i < N * d; ++i) out[b * N * d + i] = T(m[i] / nb);
  return out;
}
// Another input's pattern: sequence b gets sequence (b + 1) mod nb's pattern.
template <class T>
std::vector<T> shifted_pattern(const ModelConfig& c, const std::vector<T>& p, int nb) {
  const size_t S = size_t(c.heads) * c.N * c.N;
  std::vector<T> out(p.size());
  for (size_t b = 0; b < size_t(nb); ++b)
    std::copy(p.begin() + std::ptrdiff_t(((b + 1) % size_t(nb)) * S),
              p.begin() + std::ptrdiff_t(((b + 1) % size_t(nb) + 1) * S),
              out.begin() + std::ptrdiff_t(b * S));
  return out;
}

// ------------------------------------------------------------------ path patching
// The edges of the model: every (sender, receiver) with the sender feeding the receiver.
inline std::vector<std::pair<int, int>> all_edges(const ModelConfig& c) {
  std::vector<std::pair<int, int>> e;
  for (int r = 0; r < num_receivers(c); ++r)
    if (has_receiver(c, r))
      for (int s = 0; s < senders_end(c, r); ++s)
        if (has_component(c, s)) e.push_back({s, r});
  return e;
}

struct EdgeResult {
  int sender, receiver;
  double dlogp;    // mean change of log p(x_N) at the last position, patched minus clean
  double frac;     // dlogp / (corrupted minus clean): the share of the log-prob gap
  double kl;       // mean KL(p_clean || p_patched) at the last position
  double kl_frac;  // kl / mean KL(p_clean || p_corrupted): the share of the distribution shift
};
// Last-position log-probabilities of a run, nb x C (double).
template <class T>
std::vector<double> last_log_probs(const ModelConfig& c, const HookedCache<T>& run) {
  const int N = c.N, C = c.C;
  std::vector<double> out(size_t(run.nb) * C);
  for (int b = 0; b < run.nb; ++b) {
    const T* u = run.logits.data() + (size_t(b) * N + N - 1) * C;
    const LogSumExp z = logsumexp(u, size_t(C));
    for (int j = 0; j < C; ++j) out[size_t(b) * C + j] = double(u[j]) - z.max - z.log_sum;
  }
  return out;
}
// Mean over sequences of KL(p || q) from two nb x C log-probability arrays.
inline double mean_kl(const std::vector<double>& lp, const std::vector<double>& lq, int C) {
  const size_t nb = lp.size() / size_t(C);
  double s = 0;
  for (size_t i = 0; i < lp.size(); ++i) s += std::exp(lp[i]) * (lp[i] - lq[i]);
  return s / double(nb);
}
// Patches each edge (sender's corrupted output into the receiver, clean elsewhere), in parallel.
template <class T>
std::vector<EdgeResult> patch_edges(const HookedModel<T>& hm, const ModelConfig& c,
                                    const int32_t* seq, int nb, const HookedCache<T>& clean,
                                    const HookedCache<T>& bad,
                                    const std::vector<std::pair<int, int>>& edges) {
  const double lc = logp_last(c, clean, seq), lb = logp_last(c, bad, seq);
  const std::vector<double> pc = last_log_probs(c, clean);
  const double klb = mean_kl(pc, last_log_probs(c, bad), c.C);
  std::vector<EdgeResult> out(edges.size());
  tbb::parallel_for(size_t(0), edges.size(), [&](size_t i) {
    Hooks<T> h;
    h.edges.push_back({edges[i].first, edges[i].second, &bad});
    HookedCache<T> run;
    hm.run(seq, nb, h, run, &clean);
    const double dl = logp_last(c, run, seq) - lc;
    const double kl = mean_kl(pc, last_log_probs(c, run), c.C);
    out[i] = {edges[i].first, edges[i].second, dl, dl / (lb - lc), kl, kl / klb};
  });
  return out;
}

// ------------------------------------------------------------------ task vectors
// Nearest-centroid accuracy: centroids of the labelled rows with train[i] = true, accuracy on
// the others (Euclidean distance; ties go to the lower label). labels in [0, K).
inline double nearest_centroid_accuracy(const std::vector<double>& x, int dim,
                                        const std::vector<int>& labels,
                                        const std::vector<bool>& train, int K) {
  const size_t n = labels.size();
  std::vector<double> cen(size_t(K) * dim, 0.0);
  std::vector<int> cnt(size_t(K), 0);
  for (size_t i = 0; i < n; ++i)
    if (train[i]) {
      ++cnt[size_t(labels[i])];
      for (int j = 0; j < dim; ++j) cen[size_t(labels[i]) * dim + j] += x[i * dim + j];
    }
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < dim; ++j) cen[size_t(k) * dim + j] /= std::max(cnt[size_t(k)], 1);
  int right = 0, total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (train[i]) continue;
    int best = -1;
    double bd = INFINITY;
    for (int k = 0; k < K; ++k) {
      if (!cnt[size_t(k)]) continue;
      double s = 0;
      for (int j = 0; j < dim; ++j) {
        const double dd = x[i * dim + j] - cen[size_t(k) * dim + j];
        s += dd * dd;
      }
      if (s < bd) bd = s, best = k;
    }
    right += best == labels[i];
    ++total;
  }
  return total ? double(right) / total : NAN;
}

}  // namespace pl::markov::circuits
