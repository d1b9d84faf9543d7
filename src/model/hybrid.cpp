#include "model/hybrid.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace kc {

using engine::RowsView;
using engine::TensorEvent;

namespace {
// A row-major f32 weight [n, k] (the GEMM's tiles: engine::gemm_rows).
LinearOp rows(const std::vector<float>& w, std::size_t n, float* y, float* residual = nullptr,
              bool one_col_tile = false) {
  return {.rows = w.data(), .n = n, .y = y, .residual = residual, .one_col_tile = one_col_tile};
}
}  // namespace

std::string HybridModel::architecture() const {
  return config_.arch == HybridArch::qwen3_5 ? "qwen3_5" : "qwen3_next";
}

// ============================================================================================ state
HybridState::HybridState(const HybridConfig& c)
    : k(c.n_layers), v(c.n_layers), conv(c.n_layers), S(c.n_layers), kv_width(c.n_kv_heads * c.head_dim) {
  for (std::size_t il = 0; il < c.n_layers; ++il)
    if (!c.full_attention[il]) {
      conv[il].assign((c.conv_kernel - 1) * c.conv_dim(), 0.0f);
      S[il].assign(c.lin_v_heads * c.lin_dk * c.lin_dv, 0.0f);
    }
}

void HybridState::reserve(std::size_t n_pos) {
  constexpr std::size_t kCacheGrow = 512;
  if (n_pos <= capacity) return;
  const std::size_t cap = (n_pos + kCacheGrow - 1) / kCacheGrow * kCacheGrow;
  for (std::size_t il = 0; il < k.size(); ++il)
    if (S[il].empty()) k[il].resize(cap * kv_width), v[il].resize(cap * kv_width);
  capacity = cap;
}

// ============================================================================================ forward
struct HybridModel::Scratch {
  std::vector<float> x, xn, o;                        // [T, D]
  std::vector<float> proj, ba, y, qk, g, beta, core;  // GDN; qk [T, q̂ | k̂]
  std::vector<float> qg, aq, gate_a, ctx;             // attention
  std::vector<float> gate, up;                        // FFN [T, F]
  std::vector<float> cos_t, sin_t, logits, norm_w;
  std::size_t pos0 = 0;
};

HybridModel::ScratchPtr HybridModel::take_scratch() const { return scratch_pool_->take(); }

void HybridModel::give_back(ScratchPtr s) const {
  constexpr std::size_t kKeepLogits = std::size_t{1} << 24;  // floats; larger LM-head buffers are freed
  if (s->logits.capacity() > kKeepLogits) s->logits = {};
  scratch_pool_->give_back(std::move(s));
}

void HybridModel::report(std::string_view name, int layer, std::size_t pos0, std::size_t rows,
                         std::size_t cols, float* data) const {
  if (hook_) hook_(TensorEvent{name, layer, -1, pos0, rows, cols, {data, rows * cols}});
}

// Zero-centred RMSNorm (Qwen3NextRMSNorm): y = x̂ · (1 + w), with 1 + w formed in f32 as transformers does.
void HybridModel::norm(const std::vector<float>& w, const float* x, std::size_t rows, std::size_t d,
                       float* y) const {
  thread_local std::vector<float> w1;
  w1.resize(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) w1[i] = 1.0f + w[i];
  ops_->rmsnorm(x, w1.data(), rows, d, config_.rms_eps * kernel_.bugs.norm_eps_factor, y, kernel_.order,
                kernel_.bugs.norm_rsqrt_bits);
}

void HybridModel::gdn_block(std::size_t il, HybridState& st, std::size_t T, bool decode_step, bool store,
                            Scratch& s) const {
  const auto& c = config_;
  const auto& w = layers_[il];
  const int L = static_cast<int>(il);
  const std::size_t D = c.d_model, CD = c.conv_dim(), VD = c.value_dim(), KD = c.key_dim(), P = CD + VD;
  const std::size_t Hk = c.lin_k_heads, Hv = c.lin_v_heads, dk = c.lin_dk, dv = c.lin_dv, p0 = s.pos0;
  s.proj.resize(T * P), s.ba.resize(T * 2 * Hv), s.y.resize(T * CD), s.qk.resize(T * 2 * KD);
  s.g.resize(T * Hv), s.beta.resize(T * Hv), s.core.resize(T * VD);

  norm(w.in_norm, s.x.data(), T, D, s.xn.data());
  report("gdn.norm", L, p0, T, D, s.xn.data());
  // [T, q|k|v|z] and [T, b|a] in one region, the narrow b|a in one column tile per row block
  const LinearOp in[] = {rows(w.w_in, P, s.proj.data()), rows(w.w_ba, 2 * Hv, s.ba.data(), nullptr, true)};
  ops_->linear(s.xn.data(), T, D, std::span<const LinearOp>(in), gemm_schedule());
  report("gdn.proj", L, p0, T, P, s.proj.data());
  report("gdn.ba", L, p0, T, 2 * Hv, s.ba.data());
  ops_->gdn_causal_conv1d_silu({s.proj.data(), P}, T, CD, w.conv.data(), c.conv_kernel, st.conv[il].data(),
                               s.y.data());
  report("gdn.conv", L, p0, T, CD, s.y.data());
  ops_->gdn_gates({s.ba.data() + Hv, 2 * Hv}, {s.ba.data(), 2 * Hv}, w.A_log.data(), w.dt_bias.data(), T,
                  Hv, s.g.data(), s.beta.data());
  for (std::size_t t = 0; t < T; ++t)  // q̂, k̂: L2-normalised per head (f32), one region for both
    std::memcpy(&s.qk[t * 2 * KD], &s.y[t * CD], 2 * KD * sizeof(float));
  ops_->gdn_l2norm_rows(s.qk.data(), T * 2 * Hk, dk, dk);

  const engine::GdnShape sh{Hk, Hv, dk, dv};
  float* S = st.S[il].data();
  const RowsView qv{s.qk.data(), 2 * KD}, kv{s.qk.data() + KD, 2 * KD}, vv{s.y.data() + 2 * KD, CD};
  auto report_state = [&](std::string_view name, std::size_t rows_done) {
    report(name, L, p0 + rows_done - 1, Hv * dk, dv, S);
  };
  if (decode_step) {
    ops_->gdn_recurrent(qv, kv, vv, s.g.data(), s.beta.data(), T, sh, S, s.core.data());
    report_state("gdn.state", T);  // stored after every decode step
  } else {
    std::function<void(std::size_t)> after_chunk;
    if (hook_)
      after_chunk = [&](std::size_t done) {
        // The state leaves the kernel (is stored) only at the end of a prefill call.
        report_state(store && done == T ? "gdn.state" : "gdn.state.chunk", done);
      };
    ops_->gdn_chunked(qv, kv, vv, s.g.data(), s.beta.data(), T, sh, S, s.core.data(),
                      engine::GdnOptions{kernel_.gdn_fla_casts}, after_chunk);
  }
  report("gdn.core", L, p0, T, VD, s.core.data());
  ops_->gdn_gated_rmsnorm(s.core.data(), {s.proj.data() + CD, P}, T, Hv, dv, w.gdn_norm.data(), c.rms_eps);
  report("gdn.gnorm", L, p0, T, VD, s.core.data());
  project_residual(s.core.data(), T, VD, w.w_out, s, "gdn.out", L);
}

void HybridModel::attention_block(std::size_t il, HybridState& st, std::size_t T, Scratch& s) const {
  const auto& c = config_;
  const auto& w = layers_[il];
  const int L = static_cast<int>(il);
  const std::size_t D = c.d_model, hd = c.head_dim, nH = c.n_heads, qs = nH * hd, kvs = c.n_kv_heads * hd;
  const std::size_t p0 = s.pos0;
  s.qg.resize(T * 2 * qs), s.aq.resize(T * qs), s.gate_a.resize(T * qs), s.ctx.resize(T * qs);
  float* k_new = st.k[il].data() + p0 * kvs;
  float* v_new = st.v[il].data() + p0 * kvs;

  norm(w.in_norm, s.x.data(), T, D, s.xn.data());
  report("attn.norm", L, p0, T, D, s.xn.data());
  const LinearOp qkv[] = {rows(w.wq, 2 * qs, s.qg.data()),  // per head [query hd | gate hd]
                          rows(w.wk, kvs, k_new), rows(w.wv, kvs, v_new)};
  ops_->linear(s.xn.data(), T, D, std::span<const LinearOp>(qkv), gemm_schedule());
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t h = 0; h < nH; ++h) {
      const float* src = &s.qg[t * 2 * qs + h * 2 * hd];
      std::memcpy(&s.aq[t * qs + h * hd], src, hd * sizeof(float));
      std::memcpy(&s.gate_a[t * qs + h * hd], src + hd, hd * sizeof(float));
    }
  norm(w.q_norm, s.aq.data(), T * nH, hd, s.aq.data());
  norm(w.k_norm, k_new, T * c.n_kv_heads, hd, k_new);
  ops_->rope_rotate_half(s.aq.data(), T, nH, hd, c.rot_dim, s.cos_t.data(), s.sin_t.data());
  ops_->rope_rotate_half(k_new, T, c.n_kv_heads, hd, c.rot_dim, s.cos_t.data(), s.sin_t.data());
  report("attn.q", L, p0, T, qs, s.aq.data());
  report("attn.k", L, p0, T, kvs, k_new);
  report("attn.v", L, p0, T, kvs, v_new);
  const engine::AttentionShape shape{nH, c.n_kv_heads, hd};
  ops_->attention_causal(s.aq.data(), T, p0, st.k[il].data(), st.v[il].data(), shape, s.ctx.data(),
                         hook_ ? &hook_ : nullptr, L, kernel_);
  report("attn.ctx", L, p0, T, qs, s.ctx.data());
  report("attn.gate", L, p0, T, qs, s.gate_a.data());
  ops_->sigmoid_gate(s.ctx.data(), s.gate_a.data(), T * qs);  // the output gate
  report("attn.gated", L, p0, T, qs, s.ctx.data());
  project_residual(s.ctx.data(), T, qs, w.wo, s, "attn.out", L);
}

void HybridModel::ffn_block(std::size_t il, std::size_t T, Scratch& s) const {
  const auto& c = config_;
  const auto& w = layers_[il];
  const int L = static_cast<int>(il);
  const std::size_t D = c.d_model, F = c.d_ff, p0 = s.pos0;
  norm(w.post_norm, s.x.data(), T, D, s.xn.data());
  report("mlp.norm", L, p0, T, D, s.xn.data());
  if (c.moe[il]) {
    const engine::MoeWeights mw{.d = D, .n_experts = c.n_experts, .top_k = c.top_k, .expert_ff = c.moe_ff,
                                .shared_ff = c.shared_ff, .norm_topk = c.norm_topk, .router = w.router.data(),
                                .expert_gate_up = w.ex_gate_up.data(), .expert_down = w.ex_down.data(),
                                .shared_gate = w.sh_gate.data(), .shared_up = w.sh_up.data(),
                                .shared_down = w.sh_down.data(), .shared_gate_w = w.sh_gate_w.data()};
    ops_->moe_ffn(s.xn.data(), T, mw, s.o.data(), kernel_.order, kernel_.bugs.silu_sigmoid_bits,
                  hook_ ? &hook_ : nullptr, L, p0);
    report("mlp.out", L, p0, T, D, s.o.data());
    ops_->add_inplace(s.x.data(), s.o.data(), T * D);
    return;
  }
  s.gate.resize(T * F), s.up.resize(T * F);
  const LinearOp gate = rows(w.w_gate, F, s.gate.data()), up = rows(w.w_up, F, s.up.data());
  if (hook_) {
    const LinearOp both[] = {gate, up};
    ops_->linear(s.xn.data(), T, D, std::span<const LinearOp>(both), gemm_schedule());
    report("mlp.gate", L, p0, T, F, s.gate.data()), report("mlp.up", L, p0, T, F, s.up.data());
    ops_->silu_mul(s.gate.data(), s.up.data(), T * F, s.gate.data(), kernel_.bugs.silu_sigmoid_bits);
    report("mlp.act", L, p0, T, F, s.gate.data());
  } else {
    ops_->linear_silu(s.xn.data(), T, D, gate, up, gemm_schedule(), kernel_.bugs.silu_sigmoid_bits);
  }
  project_residual(s.gate.data(), T, F, w.w_down, s, "mlp.out", L);
}

// o [T, D] = in [T, k] · wᵀ, then x += o. Without a hook the residual add runs inside the GEMM's tiles (one
// region, same bits); else as two ops with `name` reported between them.
void HybridModel::project_residual(const float* in, std::size_t T, std::size_t k, const std::vector<float>& w,
                                   Scratch& s, std::string_view name, int layer) const {
  const std::size_t D = config_.d_model;
  if (!hook_) {
    const LinearOp o = rows(w, D, s.o.data(), s.x.data());
    return ops_->linear(in, T, k, {&o, 1}, gemm_schedule());
  }
  const LinearOp o = rows(w, D, s.o.data());
  ops_->linear(in, T, k, {&o, 1}, gemm_schedule());
  report(name, layer, s.pos0, T, D, s.o.data());
  ops_->add_inplace(s.x.data(), s.o.data(), T * D);
}

// One piece of T tokens at st.pos: logits into s.logits [T, V]. `store`: the GDN states leave the layer
// after this piece (end of a prefill call or a decode step) and are reported as "gdn.state".
void HybridModel::forward(HybridState& st, std::span<const std::int32_t> tokens, bool decode_step, bool store,
                          Scratch& s, bool want_logits) const {
  const auto& c = config_;
  const std::size_t T = tokens.size(), D = c.d_model;
  s.pos0 = st.pos;
  st.reserve(st.pos + T);
  s.x.resize(T * D), s.xn.resize(T * D), s.o.resize(T * D);
  for (std::size_t t = 0; t < T; ++t)
    std::memcpy(&s.x[t * D], &embed_[static_cast<std::size_t>(tokens[t]) * D], D * sizeof(float));
  report("embed", -1, s.pos0, T, D, s.x.data());
  s.cos_t.resize(T * c.rot_dim / 2), s.sin_t.resize(T * c.rot_dim / 2);
  ops_->rope_tables(inv_freq_, s.pos0, T, s.cos_t.data(), s.sin_t.data(), kernel_.bugs.rope_angle_bits);
  for (std::size_t il = 0; il < c.n_layers; ++il) {
    if (c.full_attention[il])
      attention_block(il, st, T, s);
    else
      gdn_block(il, st, T, decode_step, store, s);
    ffn_block(il, T, s);
    report("hidden", static_cast<int>(il), s.pos0, T, D, s.x.data());
  }
  st.pos += T;
  const auto& head = c.tied_embeddings ? embed_ : lm_head_;
  const std::size_t V = c.n_vocab;
  norm(final_norm_, s.x.data(), T, D, s.xn.data());
  report("final.norm", -1, s.pos0, T, D, s.xn.data());
  if (!want_logits) return;
  s.logits.resize(T * V);
  const LinearOp lm = rows(head, V, s.logits.data());
  ops_->linear(s.xn.data(), T, D, {&lm, 1}, gemm_schedule());
  report("logits", -1, s.pos0, T, V, s.logits.data());
}

void HybridModel::check_tokens(std::span<const std::int32_t> tokens) const {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= config_.n_vocab)
      fail("tokens: token {}: expected an id in [0, {}), got {}", i, config_.n_vocab, tokens[i]);
}

void HybridModel::prefill(HybridState& st, std::span<const std::int32_t> tokens,
                          const LogitsSink& sink) const {
  check_tokens(tokens);
  st.reserve(st.pos + tokens.size());
  ScratchPtr sp = take_scratch();
  Scratch& s = *sp;
  for (std::size_t b = 0; b < tokens.size(); b += kPrefillChunk) {
    const std::size_t n = std::min(kPrefillChunk, tokens.size() - b);
    forward(st, tokens.subspan(b, n), false, b + n == tokens.size(), s, static_cast<bool>(sink));
    if (sink) sink(s.pos0, n, {s.logits.data(), n * config_.n_vocab});
  }
  give_back(std::move(sp));
}

std::vector<float> HybridModel::prefill(HybridState& st, std::span<const std::int32_t> tokens) const {
  std::vector<float> out(tokens.size() * config_.n_vocab);
  const std::size_t first = st.pos;
  prefill(st, tokens, [&](std::size_t pos0, std::size_t, std::span<const float> logits) {
    std::copy(logits.begin(), logits.end(), out.begin() + (pos0 - first) * config_.n_vocab);
  });
  return out;
}

std::vector<float> HybridModel::decode(HybridState& st, std::int32_t token) const {
  check_tokens({&token, 1});
  ScratchPtr sp = take_scratch();
  forward(st, {&token, 1}, true, true, *sp);
  std::vector<float> out(sp->logits.begin(), sp->logits.begin() + config_.n_vocab);
  give_back(std::move(sp));
  return out;
}

void HybridModel::for_each_weight(const std::function<void(const std::string&, std::span<float>)>& fn) {
  const auto& c = config_;
  auto w = [&](const std::string& name, std::vector<float>& v, std::size_t off = 0, std::size_t n = 0) {
    if (v.empty()) return;
    fn(name, std::span<float>(v).subspan(off, n ? n : v.size() - off));
  };
  const std::string& P = c.weight_prefix;
  w(P + "embed_tokens.weight", embed_);
  for (std::size_t il = 0; il < layers_.size(); ++il) {
    auto& l = layers_[il];
    const std::string p = P + "layers." + std::to_string(il) + ".";
    w(p + "input_layernorm.weight", l.in_norm), w(p + "post_attention_layernorm.weight", l.post_norm);
    const std::string la = p + "linear_attn.";
    if (c.arch == HybridArch::qwen3_5) {  // views into the fused matrices
      const std::size_t D = c.d_model, Hv = c.lin_v_heads;
      w(la + "in_proj_qkv.weight", l.w_in, 0, c.conv_dim() * D);
      w(la + "in_proj_z.weight", l.w_in, c.conv_dim() * D);
      w(la + "in_proj_b.weight", l.w_ba, 0, Hv * D), w(la + "in_proj_a.weight", l.w_ba, Hv * D);
    } else {  // rows regrouped at load; rounding is per element
      w(la + "in_proj_qkvz.weight", l.w_in), w(la + "in_proj_ba.weight", l.w_ba);
    }
    w(la + "conv1d.weight", l.conv), w(la + "dt_bias", l.dt_bias), w(la + "A_log", l.A_log);
    w(la + "norm.weight", l.gdn_norm), w(la + "out_proj.weight", l.w_out);
    const std::string sa = p + "self_attn.";
    w(sa + "q_proj.weight", l.wq), w(sa + "k_proj.weight", l.wk), w(sa + "v_proj.weight", l.wv);
    w(sa + "o_proj.weight", l.wo), w(sa + "q_norm.weight", l.q_norm), w(sa + "k_norm.weight", l.k_norm);
    w(p + "mlp.gate_proj.weight", l.w_gate), w(p + "mlp.up_proj.weight", l.w_up);
    w(p + "mlp.down_proj.weight", l.w_down);
    w(p + "mlp.gate.weight", l.router), w(p + "mlp.experts.gate_up_proj", l.ex_gate_up);
    w(p + "mlp.experts.down_proj", l.ex_down);
    w(p + "mlp.shared_expert.gate_proj.weight", l.sh_gate),
        w(p + "mlp.shared_expert.up_proj.weight", l.sh_up);
    w(p + "mlp.shared_expert.down_proj.weight", l.sh_down);
    w(p + "mlp.shared_expert_gate.weight", l.sh_gate_w);
  }
  w(P + "norm.weight", final_norm_);
  w("lm_head.weight", lm_head_);
}

}  // namespace kc
