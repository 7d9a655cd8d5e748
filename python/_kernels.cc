// SPDX-License-Identifier: Apache-2.0
// phaselab._kernels: the kernel registry on NumPy arrays (nanobind). Each function takes the
// arrays a kernel reads and writes, C-contiguous float32 on the CPU, never converted (noconvert:
// a float64 or strided array is refused, not copied); the shapes come from the arrays and are
// checked here, so a wrong call raises ValueError instead of reading out of bounds. The Python
// layer (phaselab/kernels.py) allocates outputs, gives the friendlier messages and the docs.
// Every call releases the GIL. `target` is "" (dispatch's pick), an ISA ("avx2", "scalar") or a
// variant name ("softmax_rows.intrin.avx512").
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "phaselab/kernels.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using In = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using Out = nb::ndarray<float, nb::c_contig, nb::device::cpu>;
using OutU32 = nb::ndarray<uint32_t, nb::c_contig, nb::device::cpu>;

void need(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

std::string targets_text() {
  std::string list;
  for (const auto& t : pl::known_targets()) list += (list.empty() ? "" : ", ") + t;
  return list;
}

// The variant of kernel `id` that `target` names.
const pl::Variant& pick(pl::KernelId id, const std::string& target) {
  const int k = static_cast<int>(id);
  const std::string kname = pl::kernel_name(k);
  if (target.find('.') != std::string::npos) {
    const pl::Variant* v = pl::find_variant(target);
    need(v != nullptr,
         "unknown variant \"" + target + "\" (phaselab.kernels.variants() lists them)");
    need(v->kernel == k, "variant \"" + target + "\" is not a variant of " + kname);
    need(v->supported, "variant \"" + target + "\" is not supported by this CPU");
    return *v;
  }
  if (!target.empty() && target != "best") {
    need(pl::target_known(target),
         "unknown kernel target \"" + target + "\" (known: " + targets_text() + ")");
    need(pl::target_supported(target),
         "kernel target \"" + target +
             "\" is not supported by this CPU (best: " + pl::best_target() + ")");
  }
  const pl::Variant* v = pl::selected_variant(k, target == "best" ? std::string() : target);
  need(v != nullptr, "no variant of " + kname + " for target \"" + target + "\"");
  return *v;
}

template <pl::KernelId id, typename Fn>
Fn fn(const std::string& target) {
  return pl::as<Fn>(pick(id, target));
}

template <typename A>
size_t dim(const A& a, size_t i) {
  return a.ndim() > i ? a.shape(i) : 0;
}

void exp_(In x, Out y, const std::string& target) {
  need(x.size() == y.size(), "exp: x and y differ in size");
  auto f = fn<pl::KernelId::exp, decltype(&pl::scalar::Exp)>(target);
  nb::gil_scoped_release nogil;
  f(x.data(), y.data(), x.size());
}

void gelu_(In x, Out y, const std::string& target) {
  need(x.size() == y.size(), "gelu: x and y differ in size");
  auto f = fn<pl::KernelId::gelu, decltype(&pl::scalar::Gelu)>(target);
  nb::gil_scoped_release nogil;
  f(x.data(), y.data(), x.size());
}

void gelu_bwd_(In x, In dy, Out dx, const std::string& target) {
  need(x.size() == dy.size() && x.size() == dx.size(), "gelu_bwd: x, dy and dx differ in size");
  auto f = fn<pl::KernelId::gelu_bwd, decltype(&pl::scalar::GeluBwd)>(target);
  nb::gil_scoped_release nogil;
  f(x.data(), dy.data(), dx.data(), x.size());
}

void gelu_fwd_grad_(In x, Out y, Out dydx, const std::string& target) {
  need(x.size() == y.size() && x.size() == dydx.size(),
       "gelu_fwd_grad: x, y and dydx differ in size");
  auto f = fn<pl::KernelId::gelu_fwd_grad, decltype(&pl::scalar::GeluFwdGrad)>(target);
  nb::gil_scoped_release nogil;
  f(x.data(), y.data(), dydx.data(), x.size());
}

void softmax_rows_(In x, Out y, float scale, bool causal, const std::string& target) {
  need(x.ndim() == 2 && y.ndim() == 2, "softmax_rows: x and y must be 2-d");
  need(dim(x, 0) == dim(y, 0) && dim(x, 1) == dim(y, 1), "softmax_rows: x and y differ in shape");
  auto f = fn<pl::KernelId::softmax_rows, decltype(&pl::scalar::SoftmaxRows)>(target);
  nb::gil_scoped_release nogil;
  f(x.data(), y.data(), dim(x, 0), dim(x, 1), scale, causal ? 1 : 0);
}

void softmax_rows_bwd_(In y, In dy, Out dx, float scale, bool causal, const std::string& target) {
  need(y.ndim() == 2 && dy.ndim() == 2 && dx.ndim() == 2, "softmax_rows_bwd: arrays must be 2-d");
  need(y.size() == dy.size() && y.size() == dx.size() && dim(y, 1) == dim(dy, 1) &&
           dim(y, 1) == dim(dx, 1),
       "softmax_rows_bwd: y, dy and dx differ in shape");
  auto f = fn<pl::KernelId::softmax_rows_bwd, decltype(&pl::scalar::SoftmaxRowsBwd)>(target);
  nb::gil_scoped_release nogil;
  f(y.data(), dy.data(), dx.data(), dim(y, 0), dim(y, 1), scale, causal ? 1 : 0);
}

void layernorm_(In x, In gamma, In beta, Out y, Out mean, Out rstd, float eps,
                const std::string& target) {
  need(x.ndim() == 2 && y.ndim() == 2, "layernorm: x and y must be 2-d");
  const size_t rows = dim(x, 0), d = dim(x, 1);
  need(dim(y, 0) == rows && dim(y, 1) == d, "layernorm: x and y differ in shape");
  need(gamma.size() == d && beta.size() == d,
       "layernorm: gamma and beta must have x.shape[1] elements");
  need(mean.size() == rows && rstd.size() == rows,
       "layernorm: mean and rstd must have x.shape[0] elements");
  auto f = fn<pl::KernelId::layernorm, decltype(&pl::scalar::Layernorm)>(target);
  nb::gil_scoped_release nogil;
  f(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, d, eps);
}

void layernorm_bwd_(In dy, In x, In gamma, In mean, In rstd, Out dx, Out dgamma, Out dbeta,
                    const std::string& target) {
  need(x.ndim() == 2, "layernorm_bwd: x must be 2-d");
  const size_t rows = dim(x, 0), d = dim(x, 1);
  need(dy.size() == rows * d && dx.size() == rows * d,
       "layernorm_bwd: dy and dx must have x's shape");
  need(gamma.size() == d && dgamma.size() == d && dbeta.size() == d,
       "layernorm_bwd: gamma, dgamma and dbeta must have x.shape[1] elements");
  need(mean.size() == rows && rstd.size() == rows,
       "layernorm_bwd: mean and rstd must have x.shape[0] elements");
  auto f = fn<pl::KernelId::layernorm_bwd, decltype(&pl::scalar::LayernormBwd)>(target);
  nb::gil_scoped_release nogil;
  f(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(),
    dbeta.data(), rows, d);
}

void gemm_(bool trans_a, bool trans_b, float alpha, In a, In b, float beta, Out c,
           const std::string& target) {
  need(a.ndim() == 2 && b.ndim() == 2 && c.ndim() == 2, "gemm: a, b and c must be 2-d");
  const size_t m = trans_a ? dim(a, 1) : dim(a, 0), k = trans_a ? dim(a, 0) : dim(a, 1);
  const size_t kb = trans_b ? dim(b, 1) : dim(b, 0), n = trans_b ? dim(b, 0) : dim(b, 1);
  need(k == kb, "gemm: inner dimensions differ (op(a) is " + std::to_string(m) + " x " +
                    std::to_string(k) + ", op(b) is " + std::to_string(kb) + " x " +
                    std::to_string(n) + ")");
  need(dim(c, 0) == m && dim(c, 1) == n,
       "gemm: c must be " + std::to_string(m) + " x " + std::to_string(n));
  auto f = fn<pl::KernelId::gemm, decltype(&pl::scalar::Gemm)>(target);
  nb::gil_scoped_release nogil;
  f(trans_a, trans_b, m, n, k, alpha, a.data(), dim(a, 1), b.data(), dim(b, 1), beta, c.data(), n);
}

// Batched: a (batch x rows x cols), b and c likewise, one gemm per leading index.
void gemm_batched_(bool trans_a, bool trans_b, float alpha, In a, In b, float beta, Out c,
                   const std::string& target) {
  need(a.ndim() == 3 && b.ndim() == 3 && c.ndim() == 3, "gemm_batched: a, b and c must be 3-d");
  const size_t batch = dim(a, 0);
  need(dim(b, 0) == batch && dim(c, 0) == batch, "gemm_batched: batch sizes differ");
  const size_t m = trans_a ? dim(a, 2) : dim(a, 1), k = trans_a ? dim(a, 1) : dim(a, 2);
  const size_t kb = trans_b ? dim(b, 2) : dim(b, 1), n = trans_b ? dim(b, 1) : dim(b, 2);
  need(k == kb, "gemm_batched: inner dimensions differ");
  need(dim(c, 1) == m && dim(c, 2) == n, "gemm_batched: c must be batch x m x n");
  auto f = fn<pl::KernelId::gemm_batched, decltype(&pl::scalar::GemmBatched)>(target);
  nb::gil_scoped_release nogil;
  f(trans_a, trans_b, m, n, k, alpha, a.data(), dim(a, 2), dim(a, 1) * dim(a, 2), b.data(),
    dim(b, 2), dim(b, 1) * dim(b, 2), beta, c.data(), n, m * n, batch);
}

void gemm_epilogue_(bool trans_a, bool trans_b, float alpha, In a, In b, int epilogue, In e, Out c,
                    const std::string& target) {
  need(a.ndim() == 2 && b.ndim() == 2 && c.ndim() == 2 && e.ndim() == 2,
       "gemm_epilogue: a, b, e and c must be 2-d");
  need(epilogue == 1 || epilogue == 2, "gemm_epilogue: epilogue is 1 (multiply) or 2 (add)");
  const size_t m = trans_a ? dim(a, 1) : dim(a, 0), k = trans_a ? dim(a, 0) : dim(a, 1);
  const size_t kb = trans_b ? dim(b, 1) : dim(b, 0), n = trans_b ? dim(b, 0) : dim(b, 1);
  need(k == kb, "gemm_epilogue: inner dimensions differ");
  need(dim(c, 0) == m && dim(c, 1) == n && dim(e, 0) == m && dim(e, 1) == n,
       "gemm_epilogue: c and e must be m x n");
  need(e.data() != c.data(), "gemm_epilogue: e must not be c");
  auto f = fn<pl::KernelId::gemm_epilogue, decltype(&pl::scalar::GemmEpilogue)>(target);
  nb::gil_scoped_release nogil;
  f(trans_a, trans_b, m, n, k, alpha, a.data(), dim(a, 1), b.data(), dim(b, 1), epilogue, e.data(),
    n, c.data(), n);
}

// Copy-task positional attention: a (L x L), x (p x L x V), w (V x V); h, f (p x L x V).
void posattn_(In a, In x, In w, Out h, Out f, const std::string& target) {
  need(x.ndim() == 3, "posattn: x must be p x L x V");
  const size_t p = dim(x, 0), l = dim(x, 1), v = dim(x, 2);
  need(a.size() == l * l && w.size() == v * v, "posattn: a must be L x L and w V x V");
  need(h.size() == p * l * v && f.size() == p * l * v, "posattn: h and f must have x's shape");
  auto fn_ = fn<pl::KernelId::posattn, decltype(&pl::scalar::Posattn)>(target);
  nb::gil_scoped_release nogil;
  fn_(a.data(), x.data(), w.data(), h.data(), f.data(), p, l, v);
}

void posattn_bwd_(In a, In x, In w, In h, In df, Out da, Out dw, Out dh,
                  const std::string& target) {
  need(x.ndim() == 3, "posattn_bwd: x must be p x L x V");
  const size_t p = dim(x, 0), l = dim(x, 1), v = dim(x, 2);
  need(a.size() == l * l && da.size() == l * l && w.size() == v * v && dw.size() == v * v,
       "posattn_bwd: a, da must be L x L and w, dw V x V");
  need(h.size() == p * l * v && df.size() == p * l * v && dh.size() == p * l * v,
       "posattn_bwd: h, df and dh must have x's shape");
  auto fn_ = fn<pl::KernelId::posattn_bwd, decltype(&pl::scalar::PosattnBwd)>(target);
  nb::gil_scoped_release nogil;
  fn_(a.data(), x.data(), w.data(), h.data(), df.data(), da.data(), dw.data(), dh.data(), p, l, v);
}

void attention_(In q, In k, In v, Out o, Out p, float scale, bool causal, bool linear,
                const std::string& target) {
  need(q.ndim() == 2 && k.ndim() == 2 && v.ndim() == 2 && o.ndim() == 2 && p.ndim() == 2,
       "attention: q, k, v, o and p must be 2-d");
  const size_t n = dim(q, 0), dk = dim(q, 1), dv = dim(v, 1);
  need(dim(k, 0) == n && dim(k, 1) == dk, "attention: k must have q's shape");
  need(dim(v, 0) == n, "attention: v must have q.shape[0] rows");
  need(dim(o, 0) == n && dim(o, 1) == dv, "attention: o must be n x d_v");
  need(dim(p, 0) == n && dim(p, 1) == n, "attention: p must be n x n");
  auto f = fn<pl::KernelId::attention, decltype(&pl::scalar::Attention)>(target);
  nb::gil_scoped_release nogil;
  f(q.data(), dk, k.data(), dk, v.data(), dv, o.data(), dv, p.data(), n, dk, dv, scale,
    causal ? 1 : 0, linear ? 1 : 0);
}

void attention_bwd_(In q, In k, In v, In p, In d_o, Out dq, Out dk, Out dv, Out scratch,
                    float scale, bool causal, bool linear, const std::string& target) {
  need(q.ndim() == 2 && k.ndim() == 2 && v.ndim() == 2 && p.ndim() == 2 && d_o.ndim() == 2,
       "attention_bwd: q, k, v, p and d_o must be 2-d");
  const size_t n = dim(q, 0), d_k = dim(q, 1), d_v = dim(v, 1);
  need(dim(k, 0) == n && dim(k, 1) == d_k && dim(v, 0) == n, "attention_bwd: k, v must match q");
  need(dim(p, 0) == n && dim(p, 1) == n, "attention_bwd: p must be n x n");
  need(dim(d_o, 0) == n && dim(d_o, 1) == d_v, "attention_bwd: d_o must be n x d_v");
  need(dq.size() == n * d_k && dk.size() == n * d_k && dv.size() == n * d_v,
       "attention_bwd: dq, dk, dv must have the shapes of q, k, v");
  need(scratch.size() >= n * n, "attention_bwd: scratch must hold n * n floats");
  auto f = fn<pl::KernelId::attention_bwd, decltype(&pl::scalar::AttentionBwd)>(target);
  nb::gil_scoped_release nogil;
  f(q.data(), d_k, k.data(), d_k, v.data(), d_v, p.data(), d_o.data(), d_v, dq.data(), d_k,
    dk.data(), d_k, dv.data(), d_v, scratch.data(), n, d_k, d_v, scale, causal ? 1 : 0,
    linear ? 1 : 0);
}

void adam_(Out param, In grad, Out m, Out v, float lr, float beta1, float beta2, float eps,
           float weight_decay, int64_t step, bool decoupled, const std::string& target) {
  const size_t n = param.size();
  need(grad.size() == n && m.size() == n && v.size() == n,
       "adam: param, grad, m and v differ in size");
  need(step >= 1, "adam: step is 1-based (the first step is 1)");
  auto f = decoupled ? fn<pl::KernelId::adamw, decltype(&pl::scalar::Adamw)>(target)
                     : fn<pl::KernelId::adam, decltype(&pl::scalar::Adam)>(target);
  nb::gil_scoped_release nogil;
  f(param.data(), grad.data(), m.data(), v.data(), n, lr, beta1, beta2, eps, weight_decay, step);
}

void sgld_(Out theta, In grad, float eta, float temperature, uint64_t seed, uint64_t stream,
           uint64_t counter, const std::string& target) {
  need(theta.size() == grad.size(), "sgld: theta and grad differ in size");
  auto f = fn<pl::KernelId::sgld, decltype(&pl::scalar::Sgld)>(target);
  nb::gil_scoped_release nogil;
  f(theta.data(), grad.data(), theta.size(), eta, temperature, seed, stream, counter);
}

void gaussian_(Out out, uint64_t seed, uint64_t stream, uint64_t counter,
               const std::string& target) {
  auto f = fn<pl::KernelId::gaussian, decltype(&pl::scalar::Gaussian)>(target);
  nb::gil_scoped_release nogil;
  f(out.data(), out.size(), seed, stream, counter);
}

void uniform_bits_(OutU32 out, uint64_t seed, uint64_t stream, uint64_t counter,
                   const std::string& target) {
  auto f = fn<pl::KernelId::uniform_bits, decltype(&pl::scalar::UniformBits)>(target);
  nb::gil_scoped_release nogil;
  f(out.data(), out.size(), seed, stream, counter);
}

double sum_(In x, const std::string& target) {
  auto f = fn<pl::KernelId::sum, decltype(&pl::scalar::Sum)>(target);
  nb::gil_scoped_release nogil;
  return f(x.data(), x.size());
}

double dot_(In x, In y, const std::string& target) {
  need(x.size() == y.size(), "dot: x and y differ in size");
  auto f = fn<pl::KernelId::dot, decltype(&pl::scalar::Dot)>(target);
  nb::gil_scoped_release nogil;
  return f(x.data(), y.data(), x.size());
}

float max_(In x, const std::string& target) {
  auto f = fn<pl::KernelId::max, decltype(&pl::scalar::Max)>(target);
  nb::gil_scoped_release nogil;
  return f(x.data(), x.size());
}

nb::list variants_() {
  nb::list out;
  for (const auto& v : pl::variants()) {
    const pl::Variant* sel = pl::selected_variant(v.kernel, "");
    nb::dict d;
    d["kernel"] = pl::kernel_name(v.kernel);
    d["name"] = v.name;
    d["backend"] = v.backend;
    d["isa"] = v.isa;
    d["rank"] = v.rank;
    d["supported"] = v.supported;
    d["selected"] = sel == &v;
    out.append(d);
  }
  return out;
}

nb::list known_targets_() {
  nb::list out;
  for (const auto& t : pl::known_targets()) out.append(nb::str(t.c_str()));
  return out;
}

std::string variant_name_(const std::string& kernel, const std::string& target) {
  for (int k = 0; k < pl::kNumKernels; ++k)
    if (kernel == pl::kernel_name(k)) return pick(static_cast<pl::KernelId>(k), target).name;
  throw std::invalid_argument("unknown kernel \"" + kernel + "\"");
}

}  // namespace

NB_MODULE(_kernels, m) {
  m.doc() = "phaselab's SIMD kernels on float32 NumPy arrays (low level: use phaselab.kernels)";
  const auto t = "target"_a = "";
  m.def("exp", &exp_, "x"_a.noconvert(), "y"_a.noconvert(), t);
  m.def("gelu", &gelu_, "x"_a.noconvert(), "y"_a.noconvert(), t);
  m.def("gelu_bwd", &gelu_bwd_, "x"_a.noconvert(), "dy"_a.noconvert(), "dx"_a.noconvert(), t);
  m.def("gelu_fwd_grad", &gelu_fwd_grad_, "x"_a.noconvert(), "y"_a.noconvert(),
        "dydx"_a.noconvert(), t);
  m.def("softmax_rows", &softmax_rows_, "x"_a.noconvert(), "y"_a.noconvert(), "scale"_a, "causal"_a,
        t);
  m.def("softmax_rows_bwd", &softmax_rows_bwd_, "y"_a.noconvert(), "dy"_a.noconvert(),
        "dx"_a.noconvert(), "scale"_a, "causal"_a, t);
  m.def("layernorm", &layernorm_, "x"_a.noconvert(), "gamma"_a.noconvert(), "beta"_a.noconvert(),
        "y"_a.noconvert(), "mean"_a.noconvert(), "rstd"_a.noconvert(), "eps"_a, t);
  m.def("gemm", &gemm_, "trans_a"_a, "trans_b"_a, "alpha"_a, "a"_a.noconvert(), "b"_a.noconvert(),
        "beta"_a, "c"_a.noconvert(), t);
  m.def("layernorm_bwd", &layernorm_bwd_, "dy"_a.noconvert(), "x"_a.noconvert(),
        "gamma"_a.noconvert(), "mean"_a.noconvert(), "rstd"_a.noconvert(), "dx"_a.noconvert(),
        "dgamma"_a.noconvert(), "dbeta"_a.noconvert(), t);
  m.def("gemm_batched", &gemm_batched_, "trans_a"_a, "trans_b"_a, "alpha"_a, "a"_a.noconvert(),
        "b"_a.noconvert(), "beta"_a, "c"_a.noconvert(), t);
  m.def("gemm_epilogue", &gemm_epilogue_, "trans_a"_a, "trans_b"_a, "alpha"_a, "a"_a.noconvert(),
        "b"_a.noconvert(), "epilogue"_a, "e"_a.noconvert(), "c"_a.noconvert(), t);
  m.def("posattn", &posattn_, "a"_a.noconvert(), "x"_a.noconvert(), "w"_a.noconvert(),
        "h"_a.noconvert(), "f"_a.noconvert(), t);
  m.def("posattn_bwd", &posattn_bwd_, "a"_a.noconvert(), "x"_a.noconvert(), "w"_a.noconvert(),
        "h"_a.noconvert(), "df"_a.noconvert(), "da"_a.noconvert(), "dw"_a.noconvert(),
        "dh"_a.noconvert(), t);
  m.def("attention", &attention_, "q"_a.noconvert(), "k"_a.noconvert(), "v"_a.noconvert(),
        "o"_a.noconvert(), "p"_a.noconvert(), "scale"_a, "causal"_a, "linear"_a, t);
  m.def("attention_bwd", &attention_bwd_, "q"_a.noconvert(), "k"_a.noconvert(), "v"_a.noconvert(),
        "p"_a.noconvert(), "d_o"_a.noconvert(), "dq"_a.noconvert(), "dk"_a.noconvert(),
        "dv"_a.noconvert(), "scratch"_a.noconvert(), "scale"_a, "causal"_a, "linear"_a, t);
  m.def("adam", &adam_, "param"_a.noconvert(), "grad"_a.noconvert(), "m"_a.noconvert(),
        "v"_a.noconvert(), "lr"_a, "beta1"_a, "beta2"_a, "eps"_a, "weight_decay"_a, "step"_a,
        "decoupled"_a, t);
  m.def("sgld", &sgld_, "theta"_a.noconvert(), "grad"_a.noconvert(), "eta"_a, "temperature"_a,
        "seed"_a, "stream"_a, "counter"_a, t);
  m.def("gaussian", &gaussian_, "out"_a.noconvert(), "seed"_a, "stream"_a, "counter"_a, t);
  m.def("uniform_bits", &uniform_bits_, "out"_a.noconvert(), "seed"_a, "stream"_a, "counter"_a, t);
  m.def("sum", &sum_, "x"_a.noconvert(), t);
  m.def("dot", &dot_, "x"_a.noconvert(), "y"_a.noconvert(), t);
  m.def("max", &max_, "x"_a.noconvert(), t);
  m.def("variants", &variants_);
  m.def("known_targets", &known_targets_);
  m.def("best_target", &pl::best_target);
  m.def("variant_name", &variant_name_, "kernel"_a, t);
}
