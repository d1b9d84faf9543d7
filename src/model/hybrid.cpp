#include "model/hybrid.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/parallel.h"

namespace kc {

using engine::RowsView;
using engine::TensorEvent;

namespace {

// GEMM tiles of the prefill (y[m, n] = x[m, k]·w[n, k]ᵀ), functions of (m, n) only, so that every element is
// computed by the same single-threaded sgemm call for any thread count, and with or without a hook (the
// fused schedules below run the same calls). Rows in blocks of 256 (smaller row tiles run 20–40% slower
// at K = 192, and tiles under ~1e6 multiply-adds take OpenBLAS's small-matrix kernel, which rounds
// differently); columns halved until there are 4 tiles (2 or 4 threads get equal shares) or a tile would
// fall under 64 columns. hybrid-tiny at 512 rows: every projection 4 tiles, the LM head 32.
struct Tiles {
  std::size_t rows, cols, row_tiles, col_tiles;
  std::size_t count() const { return row_tiles * col_tiles; }
};

Tiles tiles_of(std::size_t m, std::size_t n) {
  constexpr std::size_t kRows = 256, kMaxCols = 512, kMinCols = 64, kWant = 4;
  const std::size_t rt = chunk_count(m, kRows);
  std::size_t ct = chunk_count(n, kMaxCols);
  while (rt * ct < kWant && n / (2 * ct) >= kMinCols) ct *= 2;
  const std::size_t cb = (chunk_count(n, ct) + 15) / 16 * 16;
  return {kRows, cb, rt, chunk_count(n, cb)};
}

struct Tile {
  std::size_t r0, r1, c0, c1;
};

// fn(tile) for every tile of an [m, n] output, one parallel region.
template <class Fn>
void for_tiles(std::size_t m, std::size_t n, Fn&& fn) {
  const Tiles t = tiles_of(m, n);
  parallel_for(t.count(), 1, [&](std::size_t i, std::size_t, std::size_t) {
    const std::size_t r0 = (i / t.col_tiles) * t.rows, c0 = (i % t.col_tiles) * t.cols;
    fn(Tile{r0, std::min(m, r0 + t.rows), c0, std::min(n, c0 + t.cols)});
  });
}

// One tile of y = x·wᵀ: x rows from x_rows (row r0 of the tile at x_rows[0]), y at row stride ldy.
// order ≠ 0 (`order=SEED`): K in the seed's blocks and order (engine::sgemm_nt_ordered).
void gemm_tile(const Tile& t, const float* x_rows, std::size_t k, const float* w, float* y, std::size_t ldy,
               std::uint32_t order) {
  engine::sgemm_nt_ordered(x_rows, k, w + t.c0 * k, k, y + t.r0 * ldy + t.c0, ldy, t.r1 - t.r0, t.c1 - t.c0,
                           k, order);
}

// y[m, n] = x[m, k]·w[n, k]ᵀ: prefill tiles above; a decode step (m = 1) is the engine's GEMV.
void gemm(const float* x, std::size_t m, std::size_t k, const float* w, std::size_t n, float* y,
          std::uint32_t order) {
  if (m <= 1) return engine::gemm_nt(x, m, k, w, n, y, nullptr, order);
  engine::init_blas();
  for_tiles(m, n, [&](const Tile& t) { gemm_tile(t, x + t.r0 * k, k, w, y, n, order); });
}

// y[r0:r1, c0:c1] += o[r0:r1, c0:c1] (both [·, ld]).
void add_tile(const Tile& t, float* y, const float* o, std::size_t ld) {
  for (std::size_t r = t.r0; r < t.r1; ++r)
    for (std::size_t c = t.c0; c < t.c1; ++c) y[r * ld + c] += o[r * ld + c];
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
  engine::rmsnorm(x, w1.data(), rows, d, config_.rms_eps * kernel_.bugs.norm_eps_factor, y, kernel_.order,
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
  if (T <= 1) {
    engine::gemm_nt(s.xn.data(), T, D, w.w_in.data(), P, s.proj.data(), nullptr, kernel_.order);
    engine::gemm_nt(s.xn.data(), T, D, w.w_ba.data(), 2 * Hv, s.ba.data(), nullptr, kernel_.order);
  } else {  // [T, q|k|v|z] and [T, b|a] in one region: the b|a rows ride with column tile 0
    engine::init_blas();
    for_tiles(T, P, [&](const Tile& t) {
      gemm_tile(t, s.xn.data() + t.r0 * D, D, w.w_in.data(), s.proj.data(), P, kernel_.order);
      if (t.c0 == 0)
        gemm_tile(Tile{t.r0, t.r1, 0, 2 * Hv}, s.xn.data() + t.r0 * D, D, w.w_ba.data(), s.ba.data(), 2 * Hv,
                  kernel_.order);
    });
  }
  report("gdn.proj", L, p0, T, P, s.proj.data());
  report("gdn.ba", L, p0, T, 2 * Hv, s.ba.data());
  engine::gdn_causal_conv1d_silu({s.proj.data(), P}, T, CD, w.conv.data(), c.conv_kernel, st.conv[il].data(),
                                 s.y.data());
  report("gdn.conv", L, p0, T, CD, s.y.data());
  engine::gdn_gates({s.ba.data() + Hv, 2 * Hv}, {s.ba.data(), 2 * Hv}, w.A_log.data(), w.dt_bias.data(), T,
                    Hv, s.g.data(), s.beta.data());
  for (std::size_t t = 0; t < T; ++t)  // q̂, k̂: L2-normalised per head (f32), one region for both
    std::memcpy(&s.qk[t * 2 * KD], &s.y[t * CD], 2 * KD * sizeof(float));
  engine::gdn_l2norm_rows(s.qk.data(), T * 2 * Hk, dk, dk);

  const engine::GdnShape sh{Hk, Hv, dk, dv};
  float* S = st.S[il].data();
  const RowsView qv{s.qk.data(), 2 * KD}, kv{s.qk.data() + KD, 2 * KD}, vv{s.y.data() + 2 * KD, CD};
  auto report_state = [&](std::string_view name, std::size_t rows_done) {
    report(name, L, p0 + rows_done - 1, Hv * dk, dv, S);
  };
  if (decode_step) {
    engine::gdn_recurrent(qv, kv, vv, s.g.data(), s.beta.data(), T, sh, S, s.core.data());
    report_state("gdn.state", T);  // stored after every decode step
  } else {
    std::function<void(std::size_t)> after_chunk;
    if (hook_)
      after_chunk = [&](std::size_t done) {
        // The state leaves the kernel (is stored) only at the end of a prefill call.
        report_state(store && done == T ? "gdn.state" : "gdn.state.chunk", done);
      };
    engine::gdn_chunked(qv, kv, vv, s.g.data(), s.beta.data(), T, sh, S, s.core.data(),
                        engine::GdnOptions{kernel_.gdn_fla_casts}, after_chunk);
  }
  report("gdn.core", L, p0, T, VD, s.core.data());
  engine::gdn_gated_rmsnorm(s.core.data(), {s.proj.data() + CD, P}, T, Hv, dv, w.gdn_norm.data(), c.rms_eps);
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
  gemm(s.xn.data(), T, D, w.wq.data(), 2 * qs, s.qg.data(), kernel_.order);  // per head [query hd | gate hd]
  gemm(s.xn.data(), T, D, w.wk.data(), kvs, k_new, kernel_.order);
  gemm(s.xn.data(), T, D, w.wv.data(), kvs, v_new, kernel_.order);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t h = 0; h < nH; ++h) {
      const float* src = &s.qg[t * 2 * qs + h * 2 * hd];
      std::memcpy(&s.aq[t * qs + h * hd], src, hd * sizeof(float));
      std::memcpy(&s.gate_a[t * qs + h * hd], src + hd, hd * sizeof(float));
    }
  norm(w.q_norm, s.aq.data(), T * nH, hd, s.aq.data());
  norm(w.k_norm, k_new, T * c.n_kv_heads, hd, k_new);
  engine::rope_rotate_half(s.aq.data(), T, nH, hd, c.rot_dim, s.cos_t.data(), s.sin_t.data());
  engine::rope_rotate_half(k_new, T, c.n_kv_heads, hd, c.rot_dim, s.cos_t.data(), s.sin_t.data());
  report("attn.q", L, p0, T, qs, s.aq.data());
  report("attn.k", L, p0, T, kvs, k_new);
  report("attn.v", L, p0, T, kvs, v_new);
  const engine::AttentionShape shape{nH, c.n_kv_heads, hd};
  engine::attention_causal(s.aq.data(), T, p0, st.k[il].data(), st.v[il].data(), shape, s.ctx.data(),
                           hook_ ? &hook_ : nullptr, L, kernel_);
  report("attn.ctx", L, p0, T, qs, s.ctx.data());
  report("attn.gate", L, p0, T, qs, s.gate_a.data());
  parallel_for(T, 64, [&](std::size_t, std::size_t t0, std::size_t t1) {  // sigmoid output gate
    for (std::size_t i = t0 * qs; i < t1 * qs; ++i) s.ctx[i] *= 1.0f / (1.0f + std::exp(-s.gate_a[i]));
  });
  report("attn.gated", L, p0, T, qs, s.ctx.data());
  project_residual(s.ctx.data(), T, qs, w.wo, s, "attn.out", L);
}

void HybridModel::ffn_block(std::size_t il, std::size_t T, Scratch& s) const {
  const auto& c = config_;
  const auto& w = layers_[il];
  const int L = static_cast<int>(il);
  const std::size_t D = c.d_model, p0 = s.pos0;
  if (!c.moe[il] && !hook_ && T > 1) return ffn_fused(il, T, s);
  norm(w.post_norm, s.x.data(), T, D, s.xn.data());
  report("mlp.norm", L, p0, T, D, s.xn.data());
  auto dense = [&](const float* wg, const float* wu, const float* wd, std::size_t F, const float* x,
                   std::size_t rows, float* out, bool named) {
    s.gate.resize(rows * F), s.up.resize(rows * F);
    if (rows <= 1) {
      engine::gemm_nt(x, rows, D, wg, F, s.gate.data(), nullptr, kernel_.order);
      engine::gemm_nt(x, rows, D, wu, F, s.up.data(), nullptr, kernel_.order);
    } else {  // the tiles of ffn_fused
      engine::init_blas();
      for_tiles(rows, F, [&](const Tile& t) {
        gemm_tile(t, x + t.r0 * D, D, wg, s.gate.data(), F, kernel_.order);
        gemm_tile(t, x + t.r0 * D, D, wu, s.up.data(), F, kernel_.order);
      });
    }
    if (named)
      report("mlp.gate", L, p0, rows, F, s.gate.data()), report("mlp.up", L, p0, rows, F, s.up.data());
    engine::silu_mul(s.gate.data(), s.up.data(), rows * F, s.gate.data(), kernel_.bugs.silu_sigmoid_bits);
    if (named) report("mlp.act", L, p0, rows, F, s.gate.data());
    gemm(s.gate.data(), rows, F, wd, D, out, kernel_.order);
  };
  if (!c.moe[il]) {
    dense(w.w_gate.data(), w.w_up.data(), w.w_down.data(), c.d_ff, s.xn.data(), T, s.o.data(), true);
  } else {
    // Router: softmax in f32, top-k, renormalised (Qwen3NextTopKRouter); experts in index order, then the
    // sigmoid-gated shared expert (Qwen3NextSparseMoeBlock).
    const std::size_t E = c.n_experts, K = c.top_k, Im = c.moe_ff;
    std::vector<float> probs(T * E);
    engine::gemm_nt(s.xn.data(), T, D, w.router.data(), E, probs.data(), nullptr, kernel_.order);
    report("moe.router", L, p0, T, E, probs.data());
    engine::softmax_rows(probs.data(), T, E);
    std::vector<std::vector<std::pair<std::size_t, float>>> routed(E);  // expert → (token, weight)
    std::vector<std::size_t> idx(E);
    for (std::size_t t = 0; t < T; ++t) {
      const float* p = &probs[t * E];
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
      float sum = 0;
      for (std::size_t j = 0; j < K; ++j) sum += p[idx[j]];
      for (std::size_t j = 0; j < K; ++j)
        routed[idx[j]].push_back({t, c.norm_topk ? p[idx[j]] / sum : p[idx[j]]});
    }
    std::fill(s.o.begin(), s.o.begin() + T * D, 0.0f);
    std::vector<float> xe, ye;
    for (std::size_t e = 0; e < E; ++e) {
      const auto& r = routed[e];
      if (r.empty()) continue;
      xe.resize(r.size() * D), ye.resize(r.size() * D);
      for (std::size_t j = 0; j < r.size(); ++j)
        std::memcpy(&xe[j * D], &s.xn[r[j].first * D], D * sizeof(float));
      s.gate.resize(r.size() * 2 * Im);
      engine::gemm_nt(xe.data(), r.size(), D, w.ex_gate_up.data() + e * 2 * Im * D, 2 * Im, s.gate.data(), nullptr,
                      kernel_.order);
      s.up.resize(r.size() * Im);
      for (std::size_t j = 0; j < r.size(); ++j)
        for (std::size_t i = 0; i < Im; ++i) {
          const float g = s.gate[j * 2 * Im + i];
          s.up[j * Im + i] = g / (1.0f + std::exp(-g)) * s.gate[j * 2 * Im + Im + i];
        }
      engine::gemm_nt(s.up.data(), r.size(), Im, w.ex_down.data() + e * D * Im, D, ye.data(), nullptr,
                      kernel_.order);
      for (std::size_t j = 0; j < r.size(); ++j)
        for (std::size_t i = 0; i < D; ++i) s.o[r[j].first * D + i] += ye[j * D + i] * r[j].second;
    }
    std::vector<float> sh(T * D), sg(T);
    dense(w.sh_gate.data(), w.sh_up.data(), w.sh_down.data(), c.shared_ff, s.xn.data(), T, sh.data(), false);
    engine::gemm_nt(s.xn.data(), T, D, w.sh_gate_w.data(), 1, sg.data(), nullptr, kernel_.order);
    for (std::size_t t = 0; t < T; ++t) {
      const float gt = 1.0f / (1.0f + std::exp(-sg[t]));
      for (std::size_t i = 0; i < D; ++i) s.o[t * D + i] += gt * sh[t * D + i];
    }
  }
  report("mlp.out", L, p0, T, D, s.o.data());
  engine::add_inplace(s.x.data(), s.o.data(), T * D);
}

// The dense FFN without a hook, T > 1: the same tiles and kernels as ffn_block, in three regions instead of
// six (norm; gate, up → silu·up per tile of [T, F]; down_proj → residual per tile of [T, D]).
void HybridModel::ffn_fused(std::size_t il, std::size_t T, Scratch& s) const {
  const auto& w = layers_[il];
  const std::size_t D = config_.d_model, F = config_.d_ff;
  s.gate.resize(T * F), s.up.resize(T * F);
  norm(w.post_norm, s.x.data(), T, D, s.xn.data());
  engine::init_blas();
  for_tiles(T, F, [&](const Tile& t) {
    gemm_tile(t, s.xn.data() + t.r0 * D, D, w.w_gate.data(), s.gate.data(), F, kernel_.order);
    gemm_tile(t, s.xn.data() + t.r0 * D, D, w.w_up.data(), s.up.data(), F, kernel_.order);
    for (std::size_t r = t.r0; r < t.r1; ++r) {
      float* g = s.gate.data() + r * F + t.c0;
      engine::silu_mul(g, s.up.data() + r * F + t.c0, t.c1 - t.c0, g, kernel_.bugs.silu_sigmoid_bits);
    }
  });
  project_residual(s.gate.data(), T, F, w.w_down, s, "mlp.out", static_cast<int>(il));
}

// o [T, D] = in [T, k] · wᵀ, then x += o. Without a hook and T > 1 the residual add runs inside the GEMM's
// tiles (one region, same bits); else as two ops with `name` reported between them.
void HybridModel::project_residual(const float* in, std::size_t T, std::size_t k, const std::vector<float>& w,
                                   Scratch& s, std::string_view name, int layer) const {
  const std::size_t D = config_.d_model;
  if (!hook_ && T > 1) {
    engine::init_blas();
    for_tiles(T, D, [&](const Tile& t) {
      gemm_tile(t, in + t.r0 * k, k, w.data(), s.o.data(), D, kernel_.order);
      add_tile(t, s.x.data(), s.o.data(), D);
    });
    return;
  }
  gemm(in, T, k, w.data(), D, s.o.data(), kernel_.order);
  report(name, layer, s.pos0, T, D, s.o.data());
  engine::add_inplace(s.x.data(), s.o.data(), T * D);
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
  engine::rope_tables(inv_freq_, s.pos0, T, s.cos_t.data(), s.sin_t.data(), kernel_.bugs.rope_angle_bits);
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
  gemm(s.xn.data(), T, D, head.data(), V, s.logits.data(), kernel_.order);
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
