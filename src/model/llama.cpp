#include "model/llama.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace kc {

using engine::TensorEvent;

const char* llama_arch_name(LlamaArch a) {
  switch (a) {
    case LlamaArch::llama:
      return "llama";
    case LlamaArch::qwen2:
      return "qwen2";
    case LlamaArch::qwen3:
      return "qwen3";
  }
  return "?";
}

// ============================================================================================ state
LlamaState::LlamaState(const LlamaConfig& c)
    : k(c.n_layers), v(c.n_layers), row_width(c.n_kv_heads * c.head_dim) {}

void LlamaState::reserve(std::size_t n_pos) {
  constexpr std::size_t kCacheGrow = 512;
  if (n_pos <= capacity) return;
  const std::size_t cap = (n_pos + kCacheGrow - 1) / kCacheGrow * kCacheGrow;
  for (auto* cache : {&k, &v})
    for (auto& layer : *cache) layer.resize(cap * row_width);
  capacity = cap;
}

// ============================================================================================ forward
// Activations of one forward call of T rows (reused across calls): one sequence's chunk of T tokens, or one
// token of each of T sequences (decode_batch). `slices` says which rows belong to which sequence.
struct LlamaModel::Scratch {
  struct Slice {
    LlamaState* st;
    std::size_t pos0, row0, rows;  // rows row0 … row0+rows-1 are the sequence's positions pos0 … pos0+rows-1
  };
  std::vector<Slice> slices;
  bool quant = false;         // the rows are one-token steps of a model with quantized weights (decode path)
  std::vector<float> x;       // [T, D]     residual stream
  std::vector<float> xn;      // [T, D]     normed input of a block
  std::vector<float> q;       // [T, nH·hd]
  std::vector<float> k, v;    // [T, nKV·hd] new cache rows (copied into each sequence's cache)
  std::vector<float> ctx;     // [T, nH·hd] attention output before o_proj
  std::vector<float> o;       // [T, D]     block output
  std::vector<float> gate;    // [T, F]
  std::vector<float> up;      // [T, F]
  std::vector<float> cos_t;   // [T, rot/2]
  std::vector<float> sin_t;   // [T, rot/2]
  std::vector<float> logits;  // [T, V]
  void resize(const LlamaConfig& c, std::size_t T) {
    x.resize(T * c.d_model), xn.resize(T * c.d_model), o.resize(T * c.d_model);
    q.resize(T * c.n_heads * c.head_dim), ctx.resize(T * c.n_heads * c.head_dim);
    k.resize(T * c.n_kv_heads * c.head_dim), v.resize(T * c.n_kv_heads * c.head_dim);
    gate.resize(T * c.d_ff), up.resize(T * c.d_ff);
    cos_t.resize(T * c.head_dim / 2), sin_t.resize(T * c.head_dim / 2);
    logits.resize(T * c.n_vocab);  // the first resize to a chunk's size is all that allocates
  }
};

namespace {
// A packed f32 weight with its quantized copy in the file (or none); row_map empty: rows in order.
LinearOp op(const engine::PackedMatrix& w, const QuantMatrix* q, std::size_t n, float* y,
            const float* bias = nullptr, const std::vector<std::uint32_t>* row_map = nullptr) {
  return {.packed = &w, .n = n, .y = y, .bias = bias, .q = q,
          .row_map = row_map && !row_map->empty() ? row_map->data() : nullptr};
}
}  // namespace

void LlamaModel::linear(const float* x, std::size_t T, std::size_t k, std::span<const LinearOp> ops) const {
  ops_->linear(x, T, k, ops, engine::GemmSchedule{kernel_.order, kernel_.bugs.gemm_bf16_every});
}

void LlamaModel::norm(const float* x, const float* w, std::size_t rows, std::size_t d, float* y) const {
  ops_->rmsnorm(x, w, rows, d, config_.rms_eps * kernel_.bugs.norm_eps_factor, y, kernel_.order,
                kernel_.bugs.norm_rsqrt_bits);
}

// One event per sequence: a hook sees each sequence's rows at its own positions, batched or not.
void LlamaModel::report(std::string_view name, int layer, const Scratch& s, std::size_t cols, float* data) const {
  if (!hook_) return;
  for (const auto& sl : s.slices)
    hook_(TensorEvent{name, layer, -1, sl.pos0, sl.rows, cols, {data + sl.row0 * cols, sl.rows * cols}});
}

void LlamaModel::attention_block(std::size_t il, std::size_t T, Scratch& s) const {
  const auto& c = config_;
  const auto& w = weights_.layers[il];
  const int L = static_cast<int>(il);
  const std::size_t D = c.d_model, hd = c.head_dim, qs = c.n_heads * hd, kvs = c.n_kv_heads * hd;

  norm(s.x.data(), w.attn_norm.data(), T, D, s.xn.data());  // xn [T, D]
  report("attn.norm", L, s, D, s.xn.data());
  const LlamaQuantLayer* ql = s.quant ? &quant_->layers[il] : nullptr;
  const LinearOp qkv[] = {// q [T, nH·hd], k and v [T, nKV·hd]
                          op(w.wq, ql ? &ql->wq : nullptr, qs, s.q.data(), c.qkv_bias ? w.bq.data() : nullptr,
                             ql ? &quant_->q_rows : nullptr),
                          op(w.wk, ql ? &ql->wk : nullptr, kvs, s.k.data(), c.qkv_bias ? w.bk.data() : nullptr,
                             ql ? &quant_->k_rows : nullptr),
                          op(w.wv, ql ? &ql->wv : nullptr, kvs, s.v.data(), c.qkv_bias ? w.bv.data() : nullptr)};
  linear(s.xn.data(), T, D, qkv);
  if (c.qk_norm) {  // Qwen3: RMSNorm over each head's hd dims, before RoPE
    norm(s.q.data(), w.q_norm.data(), T * c.n_heads, hd, s.q.data());
    norm(s.k.data(), w.k_norm.data(), T * c.n_kv_heads, hd, s.k.data());
  }
  auto rope = c.rope_style == RopeStyle::rotate_half ? ops_->rope_rotate_half : ops_->rope_adjacent_pairs;
  rope(s.q.data(), T, c.n_heads, hd, hd, s.cos_t.data(), s.sin_t.data());
  rope(s.k.data(), T, c.n_kv_heads, hd, hd, s.cos_t.data(), s.sin_t.data());
  report("attn.q", L, s, qs, s.q.data());  // [T, nH·hd] after bias, q-norm, RoPE
  for (const auto& sl : s.slices) {        // the new rows enter each sequence's cache [pos0 …, nKV·hd]
    float* k_new = sl.st->k[il].data() + sl.pos0 * kvs;
    float* v_new = sl.st->v[il].data() + sl.pos0 * kvs;
    std::copy_n(&s.k[sl.row0 * kvs], sl.rows * kvs, k_new);
    std::copy_n(&s.v[sl.row0 * kvs], sl.rows * kvs, v_new);
    if (!hook_) continue;  // the hook sees (and may change) the rows as cached
    hook_(TensorEvent{"attn.k", L, -1, sl.pos0, sl.rows, kvs, {k_new, sl.rows * kvs}});
    hook_(TensorEvent{"attn.v", L, -1, sl.pos0, sl.rows, kvs, {v_new, sl.rows * kvs}});
  }

  const engine::AttentionShape shape{c.n_heads, c.n_kv_heads, hd};
  const engine::TensorHook* hook = hook_ ? &hook_ : nullptr;
  if (s.slices.size() == 1) {  // one sequence: T new queries over its cache
    const auto& sl = s.slices[0];
    ops_->attention_causal(s.q.data(), T, sl.pos0, sl.st->k[il].data(), sl.st->v[il].data(), shape,
                           s.ctx.data(), hook, L, kernel_);  // ctx [T, nH·hd]
  } else {                     // one query per sequence, each over its own cache
    std::vector<engine::AttentionSeq> seqs;
    for (const auto& sl : s.slices) seqs.push_back({sl.pos0, sl.st->k[il].data(), sl.st->v[il].data()});
    ops_->attention_decode(s.q.data(), seqs, shape, s.ctx.data(), hook, L, kernel_);  // ctx [T, nH·hd]
  }
  report("attn.ctx", L, s, qs, s.ctx.data());
  const LinearOp o = op(w.wo, ql ? &ql->wo : nullptr, D, s.o.data());
  linear(s.ctx.data(), T, qs, {&o, 1});  // o [T, D]
  report("attn.out", L, s, D, s.o.data());
  ops_->add_inplace(s.x.data(), s.o.data(), T * D);
}

void LlamaModel::mlp_block(std::size_t il, std::size_t T, Scratch& s) const {
  const auto& c = config_;
  const auto& w = weights_.layers[il];
  const int L = static_cast<int>(il);
  const std::size_t D = c.d_model, F = c.d_ff;
  norm(s.x.data(), w.mlp_norm.data(), T, D, s.xn.data());  // xn [T, D]
  report("mlp.norm", L, s, D, s.xn.data());
  const LlamaQuantLayer* ql = s.quant ? &quant_->layers[il] : nullptr;
  const LinearOp gate_up[] = {op(w.w_gate, ql ? &ql->w_gate : nullptr, F, s.gate.data()),  // gate [T, F]
                              op(w.w_up, ql ? &ql->w_up : nullptr, F, s.up.data())};       // up   [T, F]
  linear(s.xn.data(), T, D, gate_up);
  report("mlp.gate", L, s, F, s.gate.data());
  report("mlp.up", L, s, F, s.up.data());
  ops_->silu_mul(s.gate.data(), s.up.data(), T * F, s.gate.data(), kernel_.bugs.silu_sigmoid_bits);  // act  [T, F]
  report("mlp.act", L, s, F, s.gate.data());
  const LinearOp down = op(w.w_down, ql ? &ql->w_down : nullptr, D, s.o.data());
  linear(s.gate.data(), T, F, {&down, 1});  // o    [T, D]
  report("mlp.out", L, s, D, s.o.data());
  ops_->add_inplace(s.x.data(), s.o.data(), T * D);
}

void LlamaModel::layer(std::size_t il, std::size_t T, Scratch& s) const {
  attention_block(il, T, s);  // x += attn(norm(x))
  mlp_block(il, T, s);        // x += mlp(norm(x))
  report("hidden", static_cast<int>(il), s, config_.d_model, s.x.data());
}

// One call of T rows (s.slices: which sequence and position each row is): logits into s.logits [T, V] (unless
// !logits: a prefill whose caller wants no logits skips the LM head, 20% of the flops). Every op is
// row-independent (one fma chain per GEMM element, per-row norms and RoPE, attention per sequence), so a
// row's bits do not depend on which other rows share the call.
void LlamaModel::forward(std::span<const std::int32_t> tokens, Scratch& s, bool logits) const {
  const auto& c = config_;
  const std::size_t T = tokens.size(), D = c.d_model, half = inv_freq_.size();
  s.resize(c, T);
  // The quantized GEMV for one-token steps only (decode; each row of a decode batch; a 1-token chunk).
  s.quant = quant_ && s.slices.size() == T;
  for (std::size_t t = 0; t < T; ++t)  // x [T, D] = embed[tokens]
    weights_.embed_row(static_cast<std::size_t>(tokens[t]), &s.x[t * D]);
  report("embed", -1, s, D, s.x.data());
  for (const auto& sl : s.slices) {  // cos/sin [T, hd/2] at each row's position
    sl.st->reserve(sl.pos0 + sl.rows);
    ops_->rope_tables(inv_freq_, sl.pos0, sl.rows, &s.cos_t[sl.row0 * half], &s.sin_t[sl.row0 * half],
                      kernel_.bugs.rope_angle_bits);
  }
  for (std::size_t il = 0; il < c.n_layers; ++il) layer(il, T, s);
  for (const auto& sl : s.slices) sl.st->pos += sl.rows;
  norm(s.x.data(), weights_.final_norm.data(), T, D, s.xn.data());
  report("final.norm", -1, s, D, s.xn.data());
  if (!logits) return;
  const LinearOp lm = op(weights_.lm_head, s.quant ? &quant_->lm_head : nullptr, c.n_vocab, s.logits.data());
  linear(s.xn.data(), T, D, {&lm, 1});  // logits [T, V]
  report("logits", -1, s, c.n_vocab, s.logits.data());
}

void LlamaModel::check_tokens(std::span<const std::int32_t> tokens) const {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= config_.n_vocab)
      fail("tokens: token {}: expected an id in [0, {}), got {}", i, config_.n_vocab, tokens[i]);
}

void LlamaModel::prefill(LlamaState& st, std::span<const std::int32_t> tokens, const LogitsSink& sink) const {
  check_tokens(tokens);
  st.reserve(st.pos + tokens.size());  // one allocation per layer: growing chunk by chunk fragments the heap
  auto sp = scratch_pool_->take();
  Scratch& s = *sp;
  for (std::size_t b = 0; b < tokens.size(); b += kPrefillChunk) {
    const std::size_t n = std::min(kPrefillChunk, tokens.size() - b), pos0 = st.pos;
    s.slices = {{&st, pos0, 0, n}};
    forward(tokens.subspan(b, n), s, static_cast<bool>(sink));
    if (sink) sink(pos0, n, {s.logits.data(), n * config_.n_vocab});
  }
  scratch_pool_->give_back(std::move(sp));
}

std::vector<float> LlamaModel::prefill(LlamaState& st, std::span<const std::int32_t> tokens) const {
  std::vector<float> out(tokens.size() * config_.n_vocab);
  const std::size_t first = st.pos;
  prefill(st, tokens, [&](std::size_t pos0, std::size_t, std::span<const float> logits) {
    std::copy(logits.begin(), logits.end(), out.begin() + (pos0 - first) * config_.n_vocab);
  });
  return out;
}

void LlamaModel::for_each_weight(const std::function<void(const std::string&, std::span<float>)>& fn) {
  quant_.reset();  // fn may change the f32 weights: from now on they, not the file, are the model
  auto w = [&](const std::string& name, std::vector<float>& v) {
    if (!v.empty()) fn(name, v);
  };
  // A packed matrix is visited row-major ([out, in] as HF stores it) and packed again afterwards: one
  // matrix's row-major copy exists at a time.
  auto m = [&](const std::string& name, engine::PackedMatrix& pm) {
    if (pm.empty()) return;
    std::vector<float> v = pm.unpack();
    fn(name, v);
    pm.pack(v.data(), pm.rows(), pm.cols());
  };
  if (config_.tied_embeddings)
    m("model.embed_tokens.weight", weights_.lm_head);
  else
    w("model.embed_tokens.weight", weights_.embed);
  for (std::size_t il = 0; il < weights_.layers.size(); ++il) {
    auto& L = weights_.layers[il];
    const std::string p = "model.layers." + std::to_string(il) + ".";
    w(p + "input_layernorm.weight", L.attn_norm);
    m(p + "self_attn.q_proj.weight", L.wq), m(p + "self_attn.k_proj.weight", L.wk);
    m(p + "self_attn.v_proj.weight", L.wv);
    w(p + "self_attn.q_proj.bias", L.bq), w(p + "self_attn.k_proj.bias", L.bk);
    w(p + "self_attn.v_proj.bias", L.bv);
    w(p + "self_attn.q_norm.weight", L.q_norm), w(p + "self_attn.k_norm.weight", L.k_norm);
    m(p + "self_attn.o_proj.weight", L.wo);
    w(p + "post_attention_layernorm.weight", L.mlp_norm);
    m(p + "mlp.gate_proj.weight", L.w_gate), m(p + "mlp.up_proj.weight", L.w_up);
    m(p + "mlp.down_proj.weight", L.w_down);
  }
  w("model.norm.weight", weights_.final_norm);
  if (!config_.tied_embeddings) m("lm_head.weight", weights_.lm_head);
}

void LlamaWeights::embed_row(std::size_t t, float* out) const {
  if (embed.empty()) return lm_head.row(t, out);
  const std::size_t D = lm_head.cols();
  std::memcpy(out, &embed[t * D], D * sizeof(float));
}

std::vector<float> LlamaWeights::embed_f32() const { return embed.empty() ? lm_head.unpack() : embed; }

std::vector<float> LlamaModel::decode(LlamaState& st, std::int32_t token) const {
  LlamaState* one = &st;
  return decode_batch({&one, 1}, {&token, 1});
}

std::vector<float> LlamaModel::decode_batch(std::span<LlamaState* const> states,
                                            std::span<const std::int32_t> tokens) const {
  KC_ASSERT(states.size() == tokens.size() && !states.empty(), "decode_batch: {} states, {} tokens",
            states.size(), tokens.size());
  check_tokens(tokens);
  auto sp = scratch_pool_->take();
  Scratch& s = *sp;
  s.slices.clear();
  for (std::size_t b = 0; b < states.size(); ++b) {
    for (std::size_t a = 0; a < b; ++a)
      KC_ASSERT(states[a] != states[b], "decode_batch: sequence {} is also row {}", b, a);
    s.slices.push_back({states[b], states[b]->pos, b, 1});
  }
  forward(tokens, s, true);
  std::vector<float> logits(s.logits.begin(), s.logits.begin() + tokens.size() * config_.n_vocab);
  scratch_pool_->give_back(std::move(sp));
  return logits;
}

std::vector<float> LlamaModel::decode_batch(std::span<SequenceState* const> states,
                                            std::span<const std::int32_t> tokens) const {
  std::vector<LlamaState*> ls;
  for (auto* st : states) ls.push_back(static_cast<LlamaState*>(st));
  return decode_batch(std::span<LlamaState* const>(ls), tokens);
}

}  // namespace kc
