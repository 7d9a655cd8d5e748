// SPDX-License-Identifier: Apache-2.0
// circuits_dump CHECKPOINT OUT.safetensors [n]: runs the circuits probes on n (default 32) ID
// probe sequences of a checkpoint and writes the inputs and the outputs as safetensors, for an
// independent reimplementation to compare against (bench/circuits_transformerlens.py):
//   tokens, tokens_permute        I32 n x (N + 1)   clean sequences, permuted-prefix corruption
//   logits                        F32 n x N x C     the clean run
//   logits_permute                F32               the corrupted run
//   abl/<name>                    F32               the clean run under an ablation:
//                                                   A1_uniform, A2_prev, M1_zero, A2_mean
//   patch/<sender>-><receiver>    F32               the clean run with one edge patched from
//                                                   the corrupted run: A1->A2.k, E->A1.v,
//                                                   M1->A2.v, A2->U, E->A2.q
//   edge_dlogp, edge_kl_frac      F64 [5]           the plugin's numbers for those edges
// The probe set is the circuits plugin's (probe_seed 0), so the sequences are its ID set's first n.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "circuits/probes.hpp"
#include "markov_common/checkpoint.hpp"
#include "markov_common/trainer.hpp"
#include "phaselab/kernels.hpp"

namespace mk = pl::markov;
namespace cc = pl::markov::circuits;
namespace st = pl::sdk::safetensors;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: circuits_dump CHECKPOINT OUT.safetensors [n]\n");
    return 2;
  }
  try {
    const int n = argc > 3 ? std::stoi(argv[3]) : 32;
    pl_kernel_table k{};
    std::string err;
    if (!pl::select_kernels("", &k, &err)) throw std::runtime_error(err);
    const mk::Checkpoint ck = mk::load_checkpoint(argv[1]);
    const mk::ModelConfig& c = ck.info.model;
    mk::Model<float> m(c, &k, 1, 1);
    mk::load_into(ck, m);
    mk::Chains ch;
    const bool mem = !ck.info.infinite;
    if (mem) {
      ch.resize(ck.info.K, c.C);
      ch.generate(k, mk::stream_seed(ck.info.chain_seed, mk::Stream::kTrainChains), 0,
                  ck.info.alpha);
    }
    const cc::ProbeSet p = cc::make_probe_set(
        k, n, c.N, c.C, ck.info.alpha, ck.info.alpha1, mem ? &ch : nullptr, mem ? &ch : nullptr,
        pl::sdk::derive(pl::sdk::derive(0, ck.info.chain_seed), 0x70726f62652d6964ull));
    const mk::HookedModel<float> hm(m);
    mk::HookedCache<float> clean, bad;
    hm.run(p.seq.data(), n, {}, clean);
    hm.run(p.corrupt[cc::kPermute].data(), n, {}, bad);
    st::File f;
    f.metadata["checkpoint"] = argv[1];
    const std::vector<int64_t> ts = {n, c.N + 1}, ls = {n, c.N, c.C};
    f.tensors.push_back(st::from_i32("tokens", ts, p.seq.data()));
    f.tensors.push_back(st::from_i32("tokens_permute", ts, p.corrupt[cc::kPermute].data()));
    f.tensors.push_back(st::from_f32("logits", ls, clean.logits.data()));
    f.tensors.push_back(st::from_f32("logits_permute", ls, bad.logits.data()));
    const auto uni = mk::uniform_pattern<float>(c, n),
               prev = mk::previous_token_pattern<float>(c, n);
    const std::vector<float> zeros(size_t(n) * c.N * c.d, 0.f);
    const std::vector<float> a2mean = cc::position_mean(c, clean.comp[size_t(mk::comp_A(1))], n);
    struct Abl {
      const char* name;
      mk::Hooks<float> h;
    } abl[4] = {{"A1_uniform", {}}, {"A2_prev", {}}, {"M1_zero", {}}, {"A2_mean", {}}};
    abl[0].h.pattern[0] = uni.data();
    abl[1].h.pattern[1] = prev.data();
    abl[2].h.replace[mk::comp_M(0)] = zeros.data();
    abl[3].h.replace[mk::comp_A(1)] = a2mean.data();
    for (auto& a : abl) {
      mk::HookedCache<float> out;
      hm.run(p.seq.data(), n, a.h, out, &clean);
      f.tensors.push_back(st::from_f32(std::string("abl/") + a.name, ls, out.logits.data()));
    }
    const std::vector<std::pair<int, int>> edges = {{mk::comp_A(0), mk::recv(1, mk::Input::kK)},
                                                    {mk::comp_E(), mk::recv(0, mk::Input::kV)},
                                                    {mk::comp_M(0), mk::recv(1, mk::Input::kV)},
                                                    {mk::comp_A(1), mk::recv_U(c)},
                                                    {mk::comp_E(), mk::recv(1, mk::Input::kQ)}};
    const auto r = cc::patch_edges(hm, c, p.seq.data(), n, clean, bad, edges);
    std::vector<double> dl, kf;
    for (size_t i = 0; i < edges.size(); ++i) {
      mk::Hooks<float> h;
      h.edges.push_back({edges[i].first, edges[i].second, &bad});
      mk::HookedCache<float> out;
      hm.run(p.seq.data(), n, h, out, &clean);
      f.tensors.push_back(st::from_f32("patch/" + mk::component_name(edges[i].first) + "->" +
                                           mk::receiver_name(c, edges[i].second),
                                       ls, out.logits.data()));
      dl.push_back(r[i].dlogp);
      kf.push_back(r[i].kl_frac);
    }
    f.tensors.push_back(st::from_f64("edge_dlogp", {int64_t(dl.size())}, dl.data()));
    f.tensors.push_back(st::from_f64("edge_kl_frac", {int64_t(kf.size())}, kf.data()));
    st::write(argv[2], f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "circuits_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
