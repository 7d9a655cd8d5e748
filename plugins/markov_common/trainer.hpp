// SPDX-License-Identifier: Apache-2.0
// One Markov-ICL training run: chains, online batches, evaluation sets with their predictor
// outputs, the model, AdamW by module (lr multipliers, freezing) and the phase metric.
// Everything is allocated in the constructor; train_step() and evaluate() do not allocate.
#pragma once

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "chains.hpp"
#include "model.hpp"
#include "predictors.hpp"
#include "sdk/phaselab_sdk.hpp"
#include "sdk/text.hpp"

namespace pl::markov {

// The random streams of a run, by purpose: stream id derive(seed, purpose) (pl::sdk::derive).
// The values are fixed: changing one changes every result that depends on it.
enum class Stream : uint64_t {
  kTrainChains = 1,  // (chain_seed) the K training chains; chain k is sub-stream k
  kInit = 2,         // (seed) the N(0,1) draws of the initial weights
  kEvalId = 3,       // (chain_seed) the ID evaluation set; sequence i is sub-stream i
  kEvalOod = 4,      // (chain_seed) the OOD evaluation set (a fresh chain per sequence)
  kBatches = 5,      // (seed) training batches; sequence b of step s is sub-stream derive(s, b)
  kAlpha1 = 6,       // (chain_seed) the fresh chains that match the 1-Gen pseudo-count
};
inline uint64_t stream_seed(uint64_t seed, Stream purpose) {
  return pl::sdk::derive(seed, uint64_t(purpose));
}

struct TrainConfig {
  ModelConfig model;
  int K = 8;
  bool infinite = false;         // a fresh chain per sequence (K unused)
  double alpha = 1, alpha1 = 1;  // alpha1 <= 0: matched to the ensemble (matched_alpha1)
  int batch = 64, chunks = 8, n_eval = 1000;
  int64_t steps = 20000;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0;
  int64_t warmup = 0;
  std::map<std::string, double> lr_mult;  // module group -> multiplier
  std::vector<std::string> freeze;        // module groups not trained
  double late_frac = 0.25;                // the late window: last quarter of positions
  uint64_t chain_seed = 0;                // the chains (shared across seeds and model sizes)
  uint64_t seed = 0;                      // init and training data
};

// Parses "a=1.5,b=0.1" into the map; throws on a malformed entry.
inline std::map<std::string, double> parse_mults(const std::string& s) {
  std::map<std::string, double> m;
  for (const auto& item : pl::sdk::split_list(s, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("expected module=value, got '" + item + "'");
    auto trim = [](std::string x) {
      x.erase(0, x.find_first_not_of(' '));
      x.erase(x.find_last_not_of(' ') + 1);
      return x;
    };
    // A whole finite number after '=' ("wte=abc", "wte=1.5x", "wte=" are refused by name).
    const std::string key = trim(item.substr(0, eq)), num = trim(item.substr(eq + 1));
    char* end = nullptr;
    const double v = num.empty() ? NAN : std::strtod(num.c_str(), &end);
    if (num.empty() || *end != 0 || !std::isfinite(v))
      throw std::invalid_argument("the value of " + key + " must be a number, got '" + num + "'");
    m[key] = v;
  }
  return m;
}
inline std::vector<std::string> parse_list(const std::string& s) {
  return pl::sdk::split_list(s, ',');
}
// Whether `g` names at least one module of the model.
inline bool known_group(const ModelConfig& c, const std::string& g) {
  for (const auto& m : modules(c))
    if (in_group(m.name, g)) return true;
  return false;
}

// An evaluation set: sequences (n x (N + 1)), the predictors' q and sum_j q log q per position.
struct EvalSet {
  int n = 0;
  std::vector<int32_t> seq;
  std::vector<float> q;                      // n x N x kNumPred x C
  std::vector<float> qlogq;                  // n x N x kNumPred
  double bayes[kNumPred] = {0, 0, 0, 0, 0};  // cross-entropy of each predictor on the set
};

struct EvalResult {
  double loss[2] = {0, 0};  // ID, OOD
  double kl[2][kNumPred], kl_late[2][kNumPred];
  int phase = 0, phase_late = 0, phase_ood = 0;
};

// The table itself, after checking that every kernel the model and trainer call is present.
inline const pl_kernel_table& require_kernels(const pl_kernel_table& k) {
  const void* const need[] = {
      (const void*)k.gemm,         (const void*)k.softmax_rows,  (const void*)k.gelu,
      (const void*)k.gelu_bwd,     (const void*)k.layernorm,     (const void*)k.layernorm_bwd,
      (const void*)k.attention,    (const void*)k.attention_bwd, (const void*)k.adamw,
      (const void*)k.uniform_bits, (const void*)k.gaussian,      (const void*)k.gelu_fwd_grad,
      (const void*)k.gemm_epilogue};
  for (const void* f : need)
    if (!f) throw std::invalid_argument("markov: the kernel table lacks a kernel the model needs");
  return k;
}

// An evaluation set of n sequences of N + 1 states, each from a chain of `train` (uniformly) or,
// with train == nullptr, from a fresh chain of the Dirichlet(alpha) ensemble; with every
// predictor's output q, sum_j q log q, and the Bayes loss of each predictor. `mem`: the chains
// the memorising predictors know (nullptr when there are none: infinite K). Shared by every
// Markov plugin so they evaluate on the same sets (same streams).
inline void make_eval_set(EvalSet& e, const pl_kernel_table& k, const Chains* train,
                          const Chains* mem, uint64_t seed, int C, int N, int n, double alpha,
                          double alpha1) {
  e.n = n;
  e.seq.assign(size_t(n) * (N + 1), 0);
  e.q.assign(size_t(n) * N * kNumPred * C, 0.f);
  e.qlogq.assign(size_t(n) * N * kNumPred, 0.f);
  std::vector<double> bayes(size_t(n) * kNumPred, 0.0);
  tbb::parallel_for(0, n, [&](int i) {
    Rng r(k, seed, uint64_t(i));
    int32_t* x = e.seq.data() + size_t(i) * (N + 1);
    if (train) {
      train->sample(int(r.below(uint64_t(train->K))), r, N + 1, x);
    } else {
      Chains fresh;
      fresh.resize(1, C);
      fresh.make(0, r, alpha);
      fresh.sample(0, r, N + 1, x);
    }
    PredictorScratch s;
    std::vector<double> q(size_t(N) * kNumPred * C);
    predict(mem, x, N, C, alpha, alpha1, s, q.data());
    for (int t = 0; t < N; ++t)
      for (int a = 0; a < kNumPred; ++a) {
        const double* qa = q.data() + (size_t(t) * kNumPred + a) * C;
        double ql = 0;
        for (int j = 0; j < C; ++j) {
          ql += qa[j] * std::log(std::fmax(qa[j], 1e-8));
          e.q[((size_t(i) * N + t) * kNumPred + a) * C + j] = float(qa[j]);
        }
        e.qlogq[(size_t(i) * N + t) * kNumPred + a] = float(ql);
        bayes[size_t(i) * kNumPred + a] -= std::log(std::fmax(qa[x[t + 1]], 1e-8));
      }
  });
  for (int a = 0; a < kNumPred; ++a) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += bayes[size_t(i) * kNumPred + a];
    e.bayes[a] = s / (double(n) * N);
  }
}

// The data side of a run, shared by every Markov plugin: the K training chains (or a fresh chain
// per sequence), the online batches, the ID / OOD evaluation sets with their predictor outputs
// and the KL phase metric of a model's log-probabilities on them. The same DataConfig gives the
// same chains, batches and evaluation sets in every plugin.
struct DataConfig {
  int C = 10, N = 128, K = 8;
  bool infinite = false;         // a fresh chain per sequence (K unused)
  double alpha = 1, alpha1 = 1;  // alpha1 <= 0: matched to the ensemble (matched_alpha1)
  int batch = 64, n_eval = 1000;
  double late_frac = 0.25;  // the late window: this last fraction of positions
  uint64_t chain_seed = 0;  // the chains and evaluation sets
};

class MarkovData {
 public:
  MarkovData(const DataConfig& dc, const pl_kernel_table& k) : c_(dc), k_(require_kernels(k)) {
    if (c_.alpha1 <= 0)
      c_.alpha1 = matched_alpha1(k_, c_.C, c_.alpha, stream_seed(c_.chain_seed, Stream::kAlpha1));
    if (!c_.infinite) {  // the K training chains: chain k from sub-stream k
      chains_.resize(c_.K, c_.C);
      chains_.generate(k_, stream_seed(c_.chain_seed, Stream::kTrainChains), 0, c_.alpha);
    }
    batch_.assign(size_t(c_.batch) * (c_.N + 1), 0);
    if (c_.infinite) {
      seq_chain_.resize(size_t(c_.batch));
      for (auto& ch : seq_chain_) ch.resize(1, c_.C);
    }
    // evaluation sets: ID from the training chains (fresh chains if infinite), OOD from fresh
    // chains of the same ensemble, one per sequence. Depend on chain_seed only.
    make_eval(id_, c_.infinite ? nullptr : &chains_, stream_seed(c_.chain_seed, Stream::kEvalId));
    make_eval(ood_, nullptr, stream_seed(c_.chain_seed, Stream::kEvalOod));
    logp_.assign(size_t(c_.batch) * c_.N * c_.C, 0.0);
  }

  const DataConfig& config() const { return c_; }  // alpha1 resolved
  double alpha1() const { return c_.alpha1; }      // the 1-Gen pseudo-count in use
  const Chains& chains() const { return chains_; }
  const EvalSet& eval_set(int s) const { return s == 0 ? id_ : ood_; }
  bool mem_defined() const { return !c_.infinite; }
  const std::vector<int32_t>& batch() const { return batch_; }

  // Fills the batch of `step`: sequence b from the sub-stream derive(step, b) of data_seed.
  void make_batch(uint64_t data_seed, int64_t step) {
    const int N = c_.N;
    tbb::parallel_for(0, c_.batch, [&](int b) {
      Rng r(k_, data_seed, pl::sdk::derive(uint64_t(step), uint64_t(b)));
      int32_t* x = batch_.data() + size_t(b) * (N + 1);
      if (c_.infinite) {
        Chains& ch = seq_chain_[size_t(b)];
        ch.make(0, r, c_.alpha);
        ch.sample(0, r, N + 1, x);
      } else {
        chains_.sample(int(r.below(uint64_t(c_.K))), r, N + 1, x);
      }
    });
  }

  // Losses and KL(q_A || p_net) averaged over sequences and positions (and the late window) on
  // both sets, and the phase labels. run(seq, nb, logp) evaluates the model on nb <= batch
  // sequences: returns their mean loss and writes the log-probabilities (nb x N x C) to logp.
  template <class Run>
  EvalResult evaluate(Run&& run) {
    EvalResult r;
    for (int s = 0; s < 2; ++s)
      eval_one(s == 0 ? id_ : ood_, run, r.loss[s], r.kl[s], r.kl_late[s]);
    const int na = mem_defined() ? kNumPred : kMem2;
    auto argmin = [&](const double* v) {
      int best = 0;
      for (int a = 1; a < na; ++a)
        if (v[a] < v[best]) best = a;
      return best;
    };
    r.phase = argmin(r.kl[0]);
    r.phase_late = argmin(r.kl_late[0]);
    r.phase_ood = argmin(r.kl[1]);
    return r;
  }

 private:
  void make_eval(EvalSet& e, const Chains* train, uint64_t seed) {
    make_eval_set(e, k_, train, mem_defined() ? &chains_ : nullptr, seed, c_.C, c_.N, c_.n_eval,
                  c_.alpha, c_.alpha1);
  }

  template <class Run>
  void eval_one(const EvalSet& e, Run& run, double& loss, double* kl, double* kl_late) {
    const int C = c_.C, N = c_.N, B = c_.batch;
    const int late0 = N - std::max(1, int(std::lround(c_.late_frac * N)));
    // running sums over (sequence, position): loss, KL to each predictor, KL in the late window
    double loss_sum = 0, kl_sum[kNumPred] = {0, 0, 0, 0, 0},
           kl_late_sum[kNumPred] = {0, 0, 0, 0, 0};
    for (int b0 = 0; b0 < e.n; b0 += B) {
      const int nb = std::min(B, e.n - b0);
      const int32_t* seq = e.seq.data() + size_t(b0) * (N + 1);
      loss_sum += run(seq, nb, logp_.data()) * double(nb) * N;
      for (int b = 0; b < nb; ++b)
        for (int t = 0; t < N; ++t) {
          const double* lp = logp_.data() + (size_t(b) * N + t) * C;
          const size_t base = (size_t(b0 + b) * N + t) * kNumPred;
          for (int a = 0; a < kNumPred; ++a) {
            const float* q = e.q.data() + (base + a) * C;
            double cross = 0;
            for (int j = 0; j < C; ++j) cross += double(q[j]) * lp[j];
            const double d = double(e.qlogq[base + a]) - cross;  // KL(q || p_net)
            kl_sum[a] += d;
            if (t >= late0) kl_late_sum[a] += d;
          }
        }
    }
    loss = loss_sum / (double(e.n) * N);
    for (int a = 0; a < kNumPred; ++a) {
      kl[a] = kl_sum[a] / (double(e.n) * N);
      kl_late[a] = kl_late_sum[a] / (double(e.n) * (N - late0));
    }
  }

  DataConfig c_;
  pl_kernel_table k_;
  Chains chains_;
  std::vector<Chains> seq_chain_;
  std::vector<int32_t> batch_;
  EvalSet id_, ood_;
  std::vector<double> logp_;
};

class Trainer {
 public:
  Trainer(const TrainConfig& tc, const pl_kernel_table& k)
      : tc_(tc),
        k_(require_kernels(k)),
        data_(data_config(tc), k_),
        model_(tc.model, &k_, tc.batch, tc.chunks) {
    tc_.alpha1 = data_.alpha1();
    // initial weights: N(0,1) from the seed's init stream
    std::vector<float> z(model_.num_params());
    k_.gaussian(z.data(), z.size(), stream_seed(tc.seed, Stream::kInit), 0, 0);
    model_.init_from_normals(z.data());
    adam_m_.assign(model_.num_params(), 0.f);
    adam_v_.assign(model_.num_params(), 0.f);
    for (const auto& m : modules(tc.model)) {
      bool frozen = false;
      double mult = 1;
      for (const auto& f : tc.freeze) frozen |= in_group(m.name, f);
      for (const auto& [g, v] : tc.lr_mult)
        if (in_group(m.name, g)) mult *= v;
      if (!frozen) groups_.push_back({m.off, m.len, mult, m.decay});
    }
  }

  Model<float>& model() { return model_; }
  const MarkovData& data() const { return data_; }
  const Chains& chains() const { return data_.chains(); }
  const EvalSet& eval_set(int s) const { return data_.eval_set(s); }
  bool mem_defined() const { return data_.mem_defined(); }
  double alpha1() const { return data_.alpha1(); }  // the 1-Gen pseudo-count in use

  // Fills the batch for `step` (each sequence from its own stream (seed, step, b)).
  void make_batch(int64_t step) { data_.make_batch(stream_seed(tc_.seed, Stream::kBatches), step); }

  // One AdamW step at 1-based `step`; returns the training loss of the batch (with_loss false:
  // 0, or NaN when a logit is not finite; see Model::forward_backward).
  double train_step(int64_t step, bool with_loss = true) {
    make_batch(step);
    const double loss = model_.forward_backward(data_.batch().data(), tc_.batch, with_loss);
    double lr = tc_.lr;
    if (tc_.warmup > 0 && step <= tc_.warmup) lr *= double(step) / double(tc_.warmup);
    for (const auto& g : groups_)
      k_.adamw(model_.params.data() + g.off, model_.grads.data() + g.off, adam_m_.data() + g.off,
               adam_v_.data() + g.off, g.len, float(lr * g.mult), float(tc_.beta1),
               float(tc_.beta2), float(tc_.eps), g.decay ? float(tc_.weight_decay) : 0.f, step);
    return loss;
  }

  // Losses and KL(q_A || p_net) averaged over sequences and positions (and the late window).
  EvalResult evaluate() {
    return evaluate_with([&](const int32_t* seq, int nb, double* logp) {
      return model_.forward_log_probs(seq, nb, logp);
    });
  }
  // The same with the model's run given (MarkovData::evaluate), e.g. to time its parts.
  template <class Run>
  EvalResult evaluate_with(Run&& run) {
    return data_.evaluate(run);
  }

 private:
  struct Group {
    size_t off, len;
    double mult;
    bool decay;
  };

  static DataConfig data_config(const TrainConfig& tc) {
    DataConfig d;
    d.C = tc.model.C;
    d.N = tc.model.N;
    d.K = tc.K;
    d.infinite = tc.infinite;
    d.alpha = tc.alpha;
    d.alpha1 = tc.alpha1;
    d.batch = tc.batch;
    d.n_eval = tc.n_eval;
    d.late_frac = tc.late_frac;
    d.chain_seed = tc.chain_seed;
    return d;
  }

  TrainConfig tc_;
  pl_kernel_table k_;
  MarkovData data_;
  Model<float> model_;
  std::vector<float> adam_m_, adam_v_;
  std::vector<Group> groups_;
};

// Log-spaced checkpoint steps in [0, steps]: 0, then round(steps^(i / (n - 1))), deduplicated.
inline std::vector<int64_t> checkpoint_steps(int64_t steps, int n) {
  std::vector<int64_t> v = {0};
  for (int i = 0; i < n; ++i) {
    const double e = n > 1 ? double(i) / (n - 1) : 1.0;
    const int64_t s = int64_t(std::llround(std::pow(double(steps), e)));
    if (s > v.back()) v.push_back(s);
  }
  if (v.back() != steps) v.push_back(steps);
  return v;
}

}  // namespace pl::markov
