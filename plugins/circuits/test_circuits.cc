// SPDX-License-Identifier: Apache-2.0
// Circuit probes: checkpoints round trip bit-exact and bad files are refused; head scores on
// hand-built patterns against hand counts; a hand-built induction model whose layer-1 pattern,
// replaced by exact previous-token attention, gives the closed-form induction output; patching
// an edge with the clean run changes nothing exactly; all senders of a receiver patched equals
// the corrupted run; the corruptions do what they say; nearest-centroid accuracy by hand; the
// window scores and enrichments on hand-built patterns against harmonic-number closed forms; the
// induction score with layer 1 uniform against a double scalar forward pass; every probe step
// asked is probed; infinite-K checkpoints record K = inf.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "circuits/probes.hpp"
#include "markov_common/checkpoint.hpp"
#include "phaselab/kernels.hpp"

namespace {

namespace mk = pl::markov;
namespace cc = pl::markov::circuits;
namespace st = pl::sdk::safetensors;

pl_kernel_table table() {
  pl_kernel_table t{};
  std::string err;
  REQUIRE_MESSAGE(pl::select_kernels("", &t, &err), err);
  return t;
}

mk::ModelConfig small_cfg() {
  mk::ModelConfig c;
  c.C = 5;
  c.N = 12;
  c.d = 8;
  c.ffn = 16;
  return c;
}

void randomise(mk::Model<float>& m, const pl_kernel_table& k, uint64_t stream) {
  std::vector<float> z(m.num_params());
  k.gaussian(z.data(), z.size(), 7, stream, 0);
  m.init_from_normals(z.data());
  for (size_t i = 0; i < m.num_params(); ++i) m.params[i] += 0.3f * z[(i * 7919) % z.size()];
}

std::string tmp_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          ("phaselab_circuits_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::vector<unsigned char> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(f)), {});
}
void spit(const std::string& p, const std::vector<unsigned char>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

std::string load_error(const std::string& p) {
  try {
    mk::load_checkpoint(p);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("checkpoint: round trip is bit-exact for every model variant, metadata kept") {
  const pl_kernel_table k = table();
  for (int variant = 0; variant < 4; ++variant) {
    mk::ModelConfig c = small_cfg();
    if (variant == 1) c.rope = true, c.tied = true;
    if (variant == 2) c.mlp = false;
    if (variant == 3) c.ln = false, c.heads = 2, c.layers = 3;
    mk::Model<float> m(c, &k, 1, 1);
    randomise(m, k, 10 + uint64_t(variant));
    mk::CheckpointInfo info;
    info.model = c;
    info.step = 1234;
    info.chain_seed = 77;
    info.K = 16;
    info.alpha = 0.5;
    info.alpha1 = 9.822647400327952;
    info.plugin = "test 1.0";
    const std::string p = tmp_path("rt.safetensors");
    mk::save_checkpoint(p, m, info);
    const mk::Checkpoint ck = mk::load_checkpoint(p);
    CHECK(ck.params.size() == m.params.size());
    CHECK(std::memcmp(ck.params.data(), m.params.data(), m.params.size() * sizeof(float)) == 0);
    CHECK(ck.info.step == 1234);
    CHECK(ck.info.chain_seed == 77);
    CHECK(ck.info.K == 16);
    CHECK(ck.info.alpha == 0.5);
    CHECK(ck.info.alpha1 == info.alpha1);  // %.17g round-trips a double exactly
    CHECK(ck.info.model.rope == c.rope);
    CHECK(ck.info.model.tied == c.tied);
    CHECK(ck.info.model.mlp == c.mlp);
    CHECK(ck.info.model.ln == c.ln);
    CHECK(ck.info.model.layers == c.layers);
    CHECK(ck.info.model.heads == c.heads);
    CHECK(ck.info.model.ln_eps == c.ln_eps);
    mk::Model<float> m2(ck.info.model, &k, 1, 1);
    mk::load_into(ck, m2);
    CHECK(std::memcmp(m2.params.data(), m.params.data(), m.params.size() * sizeof(float)) == 0);
    const auto m3 = mk::load_model(p, &k);
    CHECK(std::memcmp(m3->params.data(), m.params.data(), m.params.size() * sizeof(float)) == 0);
    // tensor names and shapes as documented
    const st::File f = st::read(p);
    CHECK(st::find(f, "wte") != nullptr);
    CHECK((st::find(f, "wpe") != nullptr) == !c.rope);
    CHECK((st::find(f, "unembed") != nullptr) == !c.tied);
    CHECK((st::find(f, "l1.ln1") != nullptr) == c.ln);
    CHECK((st::find(f, "l1.fc") != nullptr) == c.mlp);
    CHECK(st::get(f, "l1.qkv").shape == std::vector<int64_t>{3 * c.d, c.d});
    if (c.ln) CHECK(st::get(f, "lnf").shape == std::vector<int64_t>{2, c.d});
    std::remove(p.c_str());
  }
}

TEST_CASE("checkpoint: truncated, foreign and mismatched files are refused with a clear error") {
  const pl_kernel_table k = table();
  const mk::ModelConfig c = small_cfg();
  mk::Model<float> m(c, &k, 1, 1);
  randomise(m, k, 3);
  mk::CheckpointInfo info;
  info.model = c;
  const std::string p = tmp_path("bad.safetensors"), q = tmp_path("bad2.safetensors");
  mk::save_checkpoint(p, m, info);
  const std::vector<unsigned char> good = slurp(p);
  REQUIRE(load_error(p).empty());

  // truncated: the last byte, half the file, inside the 8-byte length
  for (size_t cut : {good.size() - 1, good.size() / 2, size_t(5)}) {
    spit(q, std::vector<unsigned char>(good.begin(), good.begin() + std::ptrdiff_t(cut)));
    const std::string e = load_error(q);
    CHECK_MESSAGE(!e.empty(), cut);
    CHECK(e.find(q) != std::string::npos);
  }
  // foreign: a PNG and a text file
  spit(q, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(load_error(q).find("PNG") != std::string::npos);
  spit(q, std::vector<unsigned char>(100, 'a'));
  CHECK(!load_error(q).empty());
  // a valid safetensors file that is not a phaselab checkpoint
  st::File f = st::read(p);
  st::File other = f;
  other.metadata.erase("format");
  st::write(q, other);
  CHECK(load_error(q).find("not a phaselab Markov-model checkpoint") != std::string::npos);
  // a missing tensor, a misshapen tensor, a bad metadata value
  other = f;
  other.tensors.erase(other.tensors.begin());
  st::write(q, other);
  CHECK(load_error(q).find("tensors") != std::string::npos);
  other = f;
  for (auto& t : other.tensors)
    if (t.name == "l1.o") t.shape = {int64_t(c.d) / 2, int64_t(c.d) * 2};
  st::write(q, other);
  CHECK(load_error(q).find("l1.o") != std::string::npos);
  other = f;
  other.metadata["d_model"] = "eight";
  st::write(q, other);
  CHECK(load_error(q).find("d_model") != std::string::npos);
  // a model of another config refuses the weights
  mk::ModelConfig c2 = c;
  c2.d = 16;
  mk::Model<float> m2(c2, &k, 1, 1);
  CHECK_THROWS_AS(mk::load_into(mk::load_checkpoint(p), m2), std::invalid_argument);
  std::remove(p.c_str());
  std::remove(q.c_str());
}

// Sizes in __metadata__ that the tensors do not have (d_model 2048 on a d_model 8 model) are
// refused before the parameter buffer is allocated (before: 134 MB for this one, gigabytes for
// d_model 16384).
TEST_CASE("checkpoint: metadata sizes are checked against the tensors before allocating") {
  const pl_kernel_table k = table();
  const mk::ModelConfig c = small_cfg();
  mk::Model<float> m(c, &k, 1, 1);
  mk::CheckpointInfo info;
  info.model = c;
  const std::string p = tmp_path("big.safetensors");
  mk::save_checkpoint(p, m, info);
  st::File f = st::read(p);
  f.metadata["d_model"] = "2048";
  st::write(p, f);
  auto peak_mb = [] {
    struct rusage ru {};
    ::getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
  };
  const long before = peak_mb();
  CHECK(load_error(p).find("has the wrong shape for the config") != std::string::npos);
  CHECK(peak_mb() - before < 64);
  std::remove(p.c_str());
}

TEST_CASE("head scores on hand-built patterns: previous-token, uniform, exact induction") {
  mk::ModelConfig c;
  c.N = 6;
  c.C = 3;
  c.heads = 1;
  // x = 0 1 0 1 2 0 (+ target)
  const std::vector<int32_t> x = {0, 1, 0, 1, 2, 0, 1};
  const auto prev = mk::previous_token_pattern<double>(c, 1);
  const auto uni = mk::uniform_pattern<double>(c, 1);
  const cc::HeadScores sp = cc::head_scores(c, x.data(), 1, prev.data());
  const cc::HeadScores su = cc::head_scores(c, x.data(), 1, uni.data());
  // uniform baseline of the previous-token score: mean over t = 1..5 of 1/(t+1)
  const double base = (1.0 / 2 + 1.0 / 3 + 1.0 / 4 + 1.0 / 5 + 1.0 / 6) / 5;
  CHECK(sp.prev == 1.0);
  CHECK(su.prev == doctest::Approx(base).epsilon(1e-15));
  CHECK(sp.prev_uniform == doctest::Approx(base).epsilon(1e-15));
  // matches m in [1, t] with x_{m-1} = x_t:
  //  t=1 (x=1): x_0=0 no.            t=2 (x=0): m=1 (x_0=0), m=2? x_1=1 no -> {1}
  //  t=3 (x=1): m=2 (x_1=1) -> {2}    t=4 (x=2): none
  //  t=5 (x=0): m=1 (x_0), m=3 (x_2) -> {1, 3}
  // uniform induction baseline: (1/3 + 1/4 + 2/6) / 3 positions with a match
  CHECK(su.induction == doctest::Approx((1.0 / 3 + 1.0 / 4 + 2.0 / 6) / 3).epsilon(1e-15));
  CHECK(su.induction_uniform == su.induction);
  // previous-token attention puts its weight on m = t-1: a match only when x_{t-2} = x_t:
  //  t=2: m=1 yes (1); t=3: m=2 yes (1); t=5: m=4 (x_3=1 != 0) no (0) -> 2/3
  CHECK(sp.induction == doctest::Approx(2.0 / 3).epsilon(1e-15));
  // an exact induction pattern: equal weight on the matches
  std::vector<double> ind(size_t(c.N) * c.N, 0.0);
  ind[0] = 1;
  ind[1 * 6 + 0] = 1;
  ind[2 * 6 + 1] = 1;
  ind[3 * 6 + 2] = 1;
  ind[4 * 6 + 4] = 1;
  ind[5 * 6 + 1] = 0.5, ind[5 * 6 + 3] = 0.5;
  const cc::HeadScores si = cc::head_scores(c, x.data(), 1, ind.data());
  CHECK(si.induction == 1.0);
  CHECK(si.prev == doctest::Approx((1 + 1 + 1 + 0 + 0) / 5.0).epsilon(1e-15));
}

// A hand-built attention-only induction model (no LayerNorm, d = 3C):
//   E = onehot(x_t) in dims [0, C)
//   layer 1: q = k = 0 (uniform attention), v = the token dims moved to [C, 2C), Wo = I
//   layer 2: q = g sqrt(d) onehot(x_t), k = the dims [C, 2C) (the previous token when layer 1
//            attends to t - 1), v = the token dims moved to [2C, 3C), Wo = I
//   unembedding: logit_j = kappa * (dims 2C + j)
// With layer 1's pattern replaced by exact previous-token attention, layer 2 is an induction
// head: P2[t, s] ∝ exp(g [x_{s-1} = x_t]) (s = 0: [x_0 = x_t]), logit_j = kappa sum_s P2[t, s]
// [x_s = j]. The closed form is computed here in double, independently of the model.
TEST_CASE("hand-built induction model: exact previous-token layer 1 gives the known output") {
  const pl_kernel_table k = table();
  mk::ModelConfig c;
  c.C = 4;
  c.N = 10;
  c.d = 12;
  c.heads = 1;
  c.layers = 2;
  c.mlp = false;
  c.ln = false;
  const int C = c.C, N = c.N, d = c.d;
  const double g = 3.0, kappa = 2.0;
  mk::Model<float> m(c, &k, 1, 1);
  std::fill(m.params.begin(), m.params.end(), 0.f);
  auto W = [&](float* w, int row, int col) -> float& { return w[size_t(row) * d + col]; };
  for (int j = 0; j < C; ++j) m.P.wte[size_t(j) * d + j] = 1;
  auto& L1 = m.P.l[0];
  auto& L2 = m.P.l[1];
  for (int i = 0; i < C; ++i) {
    W(L1.wqkv, 2 * d + C + i, i) = 1;                    // v1: token -> [C, 2C)
    W(L2.wqkv, i, i) = float(g * std::sqrt(double(d)));  // q2: token
    W(L2.wqkv, d + i, C + i) = 1;                        // k2: previous token
    W(L2.wqkv, 2 * d + 2 * C + i, i) = 1;                // v2: token -> [2C, 3C)
    m.P.wu[size_t(i) * d + 2 * C + i] = float(kappa);    // unembed
  }
  for (int i = 0; i < d; ++i) W(L1.wo, i, i) = W(L2.wo, i, i) = 1;

  const int nb = 3;
  std::vector<int32_t> seq(size_t(nb) * (N + 1));
  uint32_t s = 12345;
  for (auto& v : seq) s = s * 1664525u + 1013904223u, v = int32_t((s >> 16) % uint32_t(C));
  const mk::HookedModel<float> hm(m);
  mk::HookedCache<float> plain, ablated;
  hm.run(seq.data(), nb, {}, plain);
  mk::Hooks<float> h;
  const auto prev = mk::previous_token_pattern<float>(c, nb);
  h.pattern[0] = prev.data();
  hm.run(seq.data(), nb, h, ablated);

  double worst = 0, worst_plain = 0;
  std::vector<double> p2(size_t(nb) * N * N, 0.0);
  for (int b = 0; b < nb; ++b) {
    const int32_t* x = seq.data() + size_t(b) * (N + 1);
    for (int t = 0; t < N; ++t) {
      std::vector<double> w(size_t(t) + 1);
      double z = 0;
      for (int u = 0; u <= t; ++u) z += (w[size_t(u)] = std::exp(g * (x[u ? u - 1 : 0] == x[t])));
      for (int j = 0; j < C; ++j) {
        double logit = 0;
        for (int u = 0; u <= t; ++u) logit += kappa * w[size_t(u)] / z * (x[u] == j);
        const double got = ablated.logits[(size_t(b) * N + t) * C + j];
        worst = std::fmax(worst, std::fabs(got - logit));
        worst_plain =
            std::fmax(worst_plain, std::fabs(plain.logits[(size_t(b) * N + t) * C + j] - logit));
      }
      for (int u = 0; u <= t; ++u) p2[(size_t(b) * N + t) * N + u] = w[size_t(u)] / z;
    }
  }
  MESSAGE("hand-built induction: max |logit - closed form| = " << worst << " (unablated: "
                                                               << worst_plain << ")");
  CHECK(worst <= 1e-5 + 1e-5 * kappa);
  CHECK(worst_plain > 0.05);  // with its own (uniform) layer 1 the model is not an induction head
  // its layer-2 pattern is the closed form's, so the induction score is the closed form's too
  const cc::HeadScores got = cc::head_scores(c, seq.data(), nb, ablated.pattern[1].data());
  const cc::HeadScores want = cc::head_scores(c, seq.data(), nb, p2.data());
  CHECK(got.induction == doctest::Approx(want.induction).epsilon(1e-5));
  CHECK(want.induction > 2 * want.induction_uniform);
  const cc::HeadScores l1 = cc::head_scores(c, seq.data(), nb, ablated.pattern[0].data());
  CHECK(l1.prev == 1.0);
}

TEST_CASE("patching: the clean run as source changes nothing; all senders = corrupted run") {
  const pl_kernel_table k = table();
  const mk::ModelConfig c = small_cfg();
  mk::Model<float> m(c, &k, 1, 1);
  randomise(m, k, 5);
  mk::Chains ch;
  ch.resize(3, c.C);
  ch.generate(k, 11, 0, 1.0);
  const cc::ProbeSet p = cc::make_probe_set(k, 16, c.N, c.C, 1.0, 1.0, &ch, &ch, 42);
  const mk::HookedModel<float> hm(m);
  mk::HookedCache<float> clean, bad;
  hm.run(p.seq.data(), p.n, {}, clean);
  const auto edges = cc::all_edges(c);
  CHECK(edges.size() == 23);  // 3 + 2 + 9 + 4 + 5 for two layers with MLPs
  for (const auto& r : cc::patch_edges(hm, c, p.seq.data(), p.n, clean, clean, edges)) {
    CHECK(r.dlogp == 0.0);
    CHECK(r.kl == 0.0);
  }
  hm.run(p.corrupt[cc::kPermute].data(), p.n, {}, bad);
  for (int r = 0; r < mk::num_receivers(c); ++r) {
    mk::Hooks<float> h;
    for (int snd = 0; snd < mk::senders_end(c, r); ++snd) h.edges.push_back({snd, r, &bad});
    mk::HookedCache<float> out;
    hm.run(p.seq.data(), p.n, h, out, &clean);
    CHECK(std::memcmp(out.resid[size_t(r)].data(), bad.resid[size_t(r)].data(),
                      bad.resid[size_t(r)].size() * sizeof(float)) == 0);
    if (r == mk::recv_U(c)) {
      CHECK(std::memcmp(out.logits.data(), bad.logits.data(), bad.logits.size() * sizeof(float)) ==
            0);
      // and the edge results of all U's senders at once: the full corrupted shift
      const std::vector<double> pc = cc::last_log_probs(c, clean);
      CHECK(cc::mean_kl(pc, cc::last_log_probs(c, out), c.C) ==
            cc::mean_kl(pc, cc::last_log_probs(c, bad), c.C));
    }
  }
}

TEST_CASE("probe sets: the corruptions keep what they say they keep") {
  const pl_kernel_table k = table();
  const int N = 20, C = 5, n = 40;
  mk::Chains ch;
  ch.resize(4, C);
  ch.generate(k, 3, 0, 1.0);
  const cc::ProbeSet p = cc::make_probe_set(k, n, N, C, 1.0, 1.0, &ch, &ch, 9);
  const cc::ProbeSet p2 = cc::make_probe_set(k, n, N, C, 1.0, 1.0, &ch, &ch, 9);
  CHECK(p.seq == p2.seq);  // deterministic
  int last_changed = 0, perm_changed = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t* x = p.seq.data() + size_t(i) * (N + 1);
    CHECK(p.chain[size_t(i)] >= 0);
    CHECK(p.chain[size_t(i)] < 4);
    for (int co = 0; co < cc::kNumCorr; ++co) {
      const int32_t* y = p.corrupt[co].data() + size_t(i) * (N + 1);
      CHECK(y[N] == x[N]);  // the target is kept
      if (co != cc::kLastState) CHECK(y[N - 1] == x[N - 1]);
    }
    const int32_t* yl = p.corrupt[cc::kLastState].data() + size_t(i) * (N + 1);
    CHECK(std::equal(x, x + N - 1, yl));
    last_changed += yl[N - 1] != x[N - 1];
    const int32_t* yp = p.corrupt[cc::kPermute].data() + size_t(i) * (N + 1);
    std::vector<int> cx(size_t(C), 0), cy(size_t(C), 0);
    for (int t = 0; t < N - 1; ++t) ++cx[size_t(x[t])], ++cy[size_t(yp[t])];
    CHECK(cx == cy);  // unigram counts of the prefix kept
    perm_changed += !std::equal(x, x + N - 1, yp);
  }
  CHECK(last_changed == n);
  CHECK(perm_changed >= n - 2);
}

TEST_CASE("nearest-centroid accuracy by hand") {
  // 1-d points: class 0 near 0, class 1 near 10; train rows 0-3, test rows 4-7
  const std::vector<double> x = {0, 1, 10, 11, 0.4, 9, 6, 4};
  const std::vector<int> y = {0, 0, 1, 1, 0, 1, 0, 1};
  const std::vector<bool> tr = {true, true, true, true, false, false, false, false};
  // centroids 0.5 and 10.5: 0.4 -> 0 (right), 9 -> 1 (right), 6 -> 1 (wrong), 4 -> 0 (wrong)
  CHECK(cc::nearest_centroid_accuracy(x, 1, y, tr, 2) == 0.5);
}

namespace {

// `phaselab run|check CONFIG` in `dir` with the circuits plugin; the exit status (128 + signal
// when killed) and stdout + stderr.
struct Cmd {
  int rc = -1;
  std::string out;
};
Cmd phaselab(const std::string& dir, const std::string& args) {
  const char* exe = std::getenv("PHASELAB_EXE");
  REQUIRE(exe);
  const std::string cmd =
      "cd '" + dir + "' && PHASELAB_GNUPLOT= '" + exe + "' " + args + " > cmd.txt 2>&1";
  const int st = std::system(cmd.c_str());
  Cmd c;
  c.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  const auto text = slurp(dir + "/cmd.txt");
  c.out.assign(text.begin(), text.end());
  return c;
}

// A run folder's failures.csv (the failed points' reasons).
std::string failures(const std::string& run) {
  const auto text = slurp(run + "/failures.csv");
  return std::string(text.begin(), text.end());
}

}  // namespace

// source = file | run: the checkpoint's metadata is checked against circuits' own ranges (alpha
// = -0.5 and K = 0 ran with wrong chains and exit 0; alpha = -1e300 crashed); a run that did not
// finish is refused unless circuits.unfinished = true; check refuses a path that does not exist.
TEST_CASE("circuits plugin: checkpoint metadata in range, unfinished runs, a missing path") {
  const pl_kernel_table k = table();
  const std::string dir = tmp_path("e2e");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/run/checkpoints/p0000-s0");
  const mk::ModelConfig c = small_cfg();
  mk::Model<float> m(c, &k, 1, 1);
  randomise(m, k, 5);
  auto config = [&](const std::string& name, const std::string& source, const std::string& path,
                    const std::string& extra = "") {
    std::ofstream(dir + "/" + name)
        << "plugin = \"circuits\"\n[run]\nseeds = [0]\n[circuits]\n"
        << "source = \"" << source << "\"\npath = \"" << path << "\"\nn_probe = 8\n"
        << extra;
  };
  struct Bad {
    const char* what;
    int K;
    double alpha;
    const char* message;
  };
  const Bad bad[] = {
      {"alpha -0.5", 4, -0.5, "__metadata__ alpha = -0.5 is outside circuits.alpha's range (> 0)"},
      {"K 0", 0, 1.0, "__metadata__ K = 0 is outside circuits.K's range (>= 1 and <= 1048576)"},
      {"alpha -1e300", 4, -1e300, "__metadata__ alpha = -1.0000000000000001e+300 is outside"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.what);
    mk::CheckpointInfo info;
    info.model = c;
    info.K = b.K;
    info.alpha = b.alpha;
    info.alpha1 = 1;
    mk::save_checkpoint(dir + "/bad.safetensors", m, info);
    config("bad.toml", "file", "bad.safetensors");
    const Cmd r = phaselab(dir, "run bad.toml --out bad_out --quiet");
    CAPTURE(r.out);
    CHECK(r.rc == 4);  // the point failed, with the reason
    const std::string why = failures(dir + "/bad_out");
    CAPTURE(why);
    CHECK(why.find(b.message) != std::string::npos);
    CHECK(why.find("bad.safetensors") != std::string::npos);
    std::filesystem::remove_all(dir + "/bad_out");
  }
  // a run stopped before it finished: run.json says "interrupted"
  mk::CheckpointInfo info;
  info.model = c;
  info.K = 4;
  info.alpha = 1;
  info.alpha1 = 1;
  info.step = 10;
  mk::save_checkpoint(dir + "/run/checkpoints/p0000-s0/step-000000010.safetensors", m, info);
  std::ofstream(dir + "/run/run.json")
      << "{\n  \"phaselab_version\": \"0.1.0\",\n  \"status\": \"interrupted\",\n  \"points\": [\n"
         "    {\"index\": 0, \"status\": \"ok\"}\n  ]\n}\n";
  config("run.toml", "run", "run");
  Cmd r = phaselab(dir, "run run.toml --out run_out --quiet");
  CAPTURE(r.out);
  CHECK(r.rc == 4);
  CHECK(failures(dir + "/run_out")
            .find("the run run did not finish ok (run.json status \"\"interrupted\"\")") !=
        std::string::npos);
  CHECK(failures(dir + "/run_out").find("circuits.unfinished = true") != std::string::npos);
  config("point.toml", "run", "run/checkpoints/p0000-s0");
  r = phaselab(dir, "run point.toml --out point_out --quiet");
  CHECK(r.rc == 4);
  CHECK(failures(dir + "/point_out").find("status \"\"interrupted\"\"") != std::string::npos);
  config("asked.toml", "run", "run", "unfinished = true\n");
  r = phaselab(dir, "run asked.toml --out asked_out --quiet");
  CHECK(r.rc == 0);
  CHECK(r.out.find("did not finish ok") != std::string::npos);  // still said, as a warning
  // check: a path that does not exist is not "ok"
  config("missing.toml", "file", "no/such.safetensors");
  r = phaselab(dir, "check missing.toml");
  CHECK(r.rc == 2);
  CHECK(r.out.find("circuits.path \"no/such.safetensors\" does not exist") != std::string::npos);
  config("missing_run.toml", "run", "no_such_run");
  r = phaselab(dir, "check missing_run.toml");
  CHECK(r.rc == 2);
  CHECK(r.out.find("does not exist") != std::string::npos);
  config("good.toml", "file", "run/checkpoints/p0000-s0/step-000000010.safetensors");
  r = phaselab(dir, "check good.toml");
  CHECK(r.rc == 0);
  std::filesystem::remove_all(dir);
}

// Hand-built patterns with closed-form window scores: rows 1..7 attend to t - 1 (a head formed
// at early positions), rows 8..19 put 1/2 on t - 1 and spread the rest uniformly over the other
// keys. Uniform baselines from harmonic numbers: sum_{t=1}^{7} 1/(t+1) = H_8 - 1 = 481/280,
// sum_{t=10}^{19} 1/(t+1) = H_20 - H_10, sum_{t=1}^{19} 1/(t+1) = H_20 - 1.
TEST_CASE("head scores: early / late windows and enrichment over uniform, closed forms") {
  mk::ModelConfig c;
  c.N = 20;
  c.C = 3;
  c.heads = 2;
  const int N = c.N, nb = 2;
  const double H8 = 761.0 / 280, H10 = 7381.0 / 2520, H20 = 55835135.0 / 15519504;
  std::vector<double> pat(size_t(nb) * c.heads * N * N, 0.0);
  for (int bh = 0; bh < nb * c.heads; ++bh) {
    double* P = pat.data() + size_t(bh) * N * N;
    P[0] = 1;
    for (int t = 1; t < N; ++t) {
      if (t < 8) {
        P[size_t(t) * N + t - 1] = 1;
        continue;
      }
      for (int s = 0; s <= t; ++s) P[size_t(t) * N + s] = s == t - 1 ? 0.5 : 0.5 / t;
    }
  }
  std::vector<int32_t> seq(size_t(nb) * (N + 1));
  for (size_t i = 0; i < seq.size(); ++i) seq[i] = int32_t((i * 7) % 3);
  const cc::HeadScores s = cc::head_scores(c, seq.data(), nb, pat.data());
  auto close = [](double got, double ref) {
    return std::fabs(got - ref) <= 1e-14 + 1e-12 * std::fabs(ref);
  };
  const double early_u = (H8 - 1) / 7, late_u = (H20 - H10) / 10, all_u = (H20 - 1) / 19;
  CHECK(close(s.prev_early, 1.0));
  CHECK(close(s.prev_early_uniform, early_u));
  CHECK(close(cc::enrichment(s.prev_early, s.prev_early_uniform), 7 / (H8 - 1)));
  CHECK(close(s.prev_late, 0.5));
  CHECK(close(s.prev_late_uniform, late_u));
  CHECK(close(cc::enrichment(s.prev_late, s.prev_late_uniform), 5 / (H20 - H10)));
  CHECK(close(s.prev, (7 + 12 * 0.5) / 19));
  CHECK(close(s.prev_uniform, all_u));
  CHECK(close(cc::enrichment(s.prev, s.prev_uniform), 13 / (H20 - 1)));
  // uniform attention: enrichment 1 in every window and for induction
  const auto uni = mk::uniform_pattern<double>(c, nb);
  const cc::HeadScores u = cc::head_scores(c, seq.data(), nb, uni.data());
  CHECK(close(cc::enrichment(u.prev, u.prev_uniform), 1.0));
  CHECK(close(cc::enrichment(u.prev_early, u.prev_early_uniform), 1.0));
  CHECK(close(cc::enrichment(u.prev_late, u.prev_late_uniform), 1.0));
  CHECK(close(cc::enrichment(u.induction, u.induction_uniform), 1.0));
  CHECK(std::isnan(cc::enrichment(0.3, 0.0)));
}

namespace {
// Double-precision scalar forward of a pre-LN model with learned positions, MLPs and untied
// unembedding, written from docs/markov-model.md without the model's code: layer 2's attention
// pattern (nb x H x N x N) with layer 1's pattern uniform over the causal prefix (l1_uniform)
// or layer 1's own softmax pattern.
std::vector<double> ref_l2_pattern(const mk::Model<float>& m, const std::vector<int32_t>& seq,
                                   int nb, bool l1_uniform) {
  const mk::ModelConfig& c = m.config();
  const int N = c.N, d = c.d, H = c.heads, dh = d / H, F = c.ffn;
  using Vec = std::vector<double>;
  auto ln = [&](const Vec& x, const float* g, const float* b) {
    double mu = 0, var = 0;
    for (double v : x) mu += v;
    mu /= d;
    for (double v : x) var += (v - mu) * (v - mu);
    const double rs = 1 / std::sqrt(var / d + c.ln_eps);
    Vec y(size_t(d), 0.0);
    for (int i = 0; i < d; ++i) y[size_t(i)] = (x[size_t(i)] - mu) * rs * g[i] + b[i];
    return y;
  };
  auto matvec = [&](const float* w, int rows, int cols, const Vec& x) {  // w: rows x cols
    Vec y(size_t(rows), 0.0);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < cols; ++j) y[size_t(r)] += double(w[size_t(r) * cols + j]) * x[size_t(j)];
    return y;
  };
  // causal softmax(q k / sqrt(dh)) of one head from per-position q and k vectors
  auto pattern = [&](const std::vector<Vec>& q, const std::vector<Vec>& k, int h, double* P) {
    for (int t = 0; t < N; ++t) {
      Vec sc(size_t(t) + 1);
      double mx = -INFINITY, z = 0;
      for (int s = 0; s <= t; ++s) {
        double v = 0;
        for (int i = h * dh; i < (h + 1) * dh; ++i)
          v += q[size_t(t)][size_t(i)] * k[size_t(s)][size_t(i)];
        sc[size_t(s)] = v / std::sqrt(double(dh));
        mx = std::fmax(mx, sc[size_t(s)]);
      }
      for (int s = 0; s <= t; ++s) z += std::exp(sc[size_t(s)] - mx);
      for (int s = 0; s < N; ++s)
        P[size_t(t) * N + s] = s <= t ? std::exp(sc[size_t(s)] - mx) / z : 0;
    }
  };
  std::vector<double> out(size_t(nb) * H * N * N, 0.0);
  for (int b = 0; b < nb; ++b) {
    std::vector<Vec> x(static_cast<size_t>(N), Vec(static_cast<size_t>(d)));
    for (int t = 0; t < N; ++t)
      for (int i = 0; i < d; ++i)
        x[size_t(t)][size_t(i)] = double(m.P.wte[size_t(seq[size_t(b) * (N + 1) + t]) * d + i]) +
                                  double(m.P.wpe[size_t(t) * d + i]);
    for (int l = 0; l < 2; ++l) {
      const auto& W = m.P.l[size_t(l)];
      std::vector<Vec> q(static_cast<size_t>(N)), k(q), v(q);
      for (int t = 0; t < N; ++t) {
        const Vec a = ln(x[size_t(t)], W.ln1g, W.ln1b);
        q[size_t(t)] = matvec(W.wqkv, d, d, a);
        k[size_t(t)] = matvec(W.wqkv + size_t(d) * d, d, d, a);
        v[size_t(t)] = matvec(W.wqkv + size_t(2) * d * d, d, d, a);
      }
      std::vector<double> P(size_t(H) * N * N, 0.0);
      for (int h = 0; h < H; ++h) {
        double* Ph = P.data() + size_t(h) * N * N;
        if (l == 1) {
          pattern(q, k, h, out.data() + (size_t(b) * H + h) * N * N);
          continue;
        }
        if (l1_uniform) {
          for (int t = 0; t < N; ++t)
            for (int s = 0; s <= t; ++s) Ph[size_t(t) * N + s] = 1.0 / (t + 1);
        } else {
          pattern(q, k, h, Ph);
        }
      }
      if (l == 1) break;
      for (int t = 0; t < N; ++t) {
        Vec att(size_t(d), 0.0);
        for (int h = 0; h < H; ++h)
          for (int s = 0; s <= t; ++s)
            for (int i = h * dh; i < (h + 1) * dh; ++i)
              att[size_t(i)] += P[(size_t(h) * N + t) * N + s] * v[size_t(s)][size_t(i)];
        const Vec a = matvec(W.wo, d, d, att);
        for (int i = 0; i < d; ++i) x[size_t(t)][size_t(i)] += a[size_t(i)];
        const Vec u = matvec(W.wfc, F, d, ln(x[size_t(t)], W.ln2g, W.ln2b));
        Vec g(static_cast<size_t>(F));
        for (int f = 0; f < F; ++f) {
          const double z = u[size_t(f)];
          g[size_t(f)] = 0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
        }
        const Vec mo = matvec(W.wproj, d, F, g);
        for (int i = 0; i < d; ++i) x[size_t(t)][size_t(i)] += mo[size_t(i)];
      }
    }
  }
  return out;
}
// The induction score from its definition (docs/circuits.md), on double patterns.
double ref_induction(const std::vector<double>& P, const std::vector<int32_t>& seq, int nb, int H,
                     int N) {
  double sum = 0;
  int count = 0;
  for (int b = 0; b < nb; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 1; t < N; ++t) {
        const int32_t* x = seq.data() + size_t(b) * (N + 1);
        double s = 0;
        bool any = false;
        for (int m = 1; m <= t; ++m)
          if (x[m - 1] == x[t]) s += P[((size_t(b) * H + h) * N + t) * N + m], any = true;
        if (any) sum += s, ++count;
      }
  return sum / count;
}
}  // namespace

TEST_CASE("induction score with layer 1 uniform against a double scalar forward pass") {
  const pl_kernel_table k = table();
  for (int heads : {1, 2}) {
    CAPTURE(heads);
    mk::ModelConfig c = small_cfg();
    c.heads = heads;
    mk::Model<float> m(c, &k, 1, 1);
    randomise(m, k, 40 + uint64_t(heads));
    const int nb = 6, N = c.N;
    std::vector<int32_t> seq(size_t(nb) * (N + 1));
    uint32_t s = 99;
    for (auto& v : seq) s = s * 1664525u + 1013904223u, v = int32_t((s >> 16) % uint32_t(c.C));
    const mk::HookedModel<float> hm(m);
    mk::HookedCache<float> clean;
    hm.run(seq.data(), nb, {}, clean);
    const auto got = cc::head_scores_l1_uniform(hm, c, seq.data(), nb, &clean);
    const auto got_nocache = cc::head_scores_l1_uniform(hm, c, seq.data(), nb);
    const cc::HeadScores own = cc::head_scores(c, seq.data(), nb, clean.pattern[1].data());
    const double ref_u = ref_induction(ref_l2_pattern(m, seq, nb, true), seq, nb, heads, N);
    const double ref_own = ref_induction(ref_l2_pattern(m, seq, nb, false), seq, nb, heads, N);
    MESSAGE("heads " << heads << ": L2 induction with L1 uniform " << got[1].induction << " (ref "
                     << ref_u << "), with its own L1 " << own.induction << " (ref " << ref_own
                     << ")");
    CHECK(std::fabs(got[1].induction - ref_u) <= 1e-6 + 1e-5 * std::fabs(ref_u));
    CHECK(got_nocache[1].induction == got[1].induction);
    CHECK(std::fabs(own.induction - ref_own) <= 1e-6 + 1e-5 * std::fabs(ref_own));
    // the two differ by far more than the tolerance: the check above can tell them apart
    CHECK(std::fabs(ref_u - ref_own) > 1e-3);
    // layer 1's entry is the uniform pattern's own score: enrichment 1
    CHECK(got[0].induction == doctest::Approx(got[0].induction_uniform).epsilon(1e-6));
  }
}

TEST_CASE("probe steps: every checkpoint asked is probed, log-spaced, ending at the last step") {
  // 30 asked over 4000 steps: log spacing rounds 1.33, 1.77, 2.36, ... to repeats; they become
  // consecutive steps and the rest is markov_icl's log grid
  const auto v = cc::probe_steps(4000, 30);
  CHECK(v.size() == 31);
  const std::vector<int64_t> head = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 13, 17};
  CHECK(std::vector<int64_t>(v.begin(), v.begin() + 12) == head);
  CHECK(v.back() == 4000);
  const auto old = mk::checkpoint_steps(4000, 30);
  CHECK(old.size() == 29);  // what dropping the repeats gave
  CHECK(std::vector<int64_t>(v.end() - 20, v.end()) ==
        std::vector<int64_t>(old.end() - 20, old.end()));
  CHECK(cc::probe_steps(4000, 12) == mk::checkpoint_steps(4000, 12));  // no repeats: the same
  for (int64_t steps : {1, 2, 5, 17, 100, 4000, 100000})
    for (int n : {1, 2, 3, 7, 12, 30, 64, 200}) {
      CAPTURE(steps);
      CAPTURE(n);
      const auto p = cc::probe_steps(steps, n);
      CHECK(int64_t(p.size()) == std::min<int64_t>(n, steps) + 1);
      CHECK(p.front() == 0);
      CHECK(p.back() == steps);
      for (size_t i = 1; i < p.size(); ++i) CHECK(p[i] > p[i - 1]);
    }
}

TEST_CASE("checkpoint metadata: infinite K is recorded as K = inf and read back as 0") {
  const pl_kernel_table k = table();
  const mk::ModelConfig c = small_cfg();
  mk::Model<float> m(c, &k, 1, 1);
  randomise(m, k, 3);
  mk::CheckpointInfo info;
  info.model = c;
  info.K = 8;  // the unused K key of an infinite-K run
  info.infinite = true;
  const std::string p = tmp_path("inf.safetensors");
  mk::save_checkpoint(p, m, info);
  const st::File f = st::read(p);
  CHECK(f.metadata.at("K") == "inf");
  CHECK(f.metadata.at("infinite") == "true");
  const mk::Checkpoint ck = mk::load_checkpoint(p);
  CHECK(ck.info.infinite);
  CHECK(ck.info.K == 0);
  // finite K keeps its number
  info.infinite = false;
  mk::save_checkpoint(p, m, info);
  CHECK(st::read(p).metadata.at("K") == "8");
  CHECK(mk::load_checkpoint(p).info.K == 8);
  std::remove(p.c_str());
}
