// Loading a Qwen3.5 / Qwen3-Next hybrid from an HF checkpoint folder: config.json (flat, or nested under
// text_config in the vision-language wrappers), every tensor checked for presence and shape.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/hf_checkpoint.h"
#include "model/hybrid.h"

namespace kc {
namespace {

using json = nlohmann::json;
using Shape = std::vector<std::int64_t>;

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Reads fields of one config object; `where` prefixes the field in messages ("text_config.").
struct ConfigReader {
  const json& j;
  std::string path, where;
  const json* find(const std::string& key) const {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  std::size_t uint(const std::string& key, std::optional<std::size_t> fallback = std::nullopt) const {
    const json* v = find(key);
    if (!v) {
      if (fallback) return *fallback;
      throw_input_error(path, where + key, "a non-negative integer", "missing");
    }
    if (!v->is_number_unsigned()) throw_input_error(path, where + key, "a non-negative integer", v->dump());
    return v->get<std::size_t>();
  }
  std::size_t positive(const std::string& key, std::optional<std::size_t> fallback = std::nullopt) const {
    if (!fallback && !find(key)) throw_input_error(path, where + key, "a positive integer", "missing");
    const std::size_t v = uint(key, fallback);
    if (v == 0) throw_input_error(path, where + key, "a positive integer", "0");
    return v;
  }
  double number(const json& obj, const std::string& key, double fallback, const std::string& field) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_number()) throw_input_error(path, field, "a number", it->dump());
    return it->get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) throw_input_error(path, where + key, "true or false", v->dump());
    return v->get<bool>();
  }
};

std::string model_type_of(const json& j) {
  if (j.contains("model_type") && j["model_type"].is_string()) return j["model_type"].get<std::string>();
  return {};
}

HybridConfig parse_config(const json& root, const std::string& path, const HfCheckpoint& ck) {
  const std::string top = model_type_of(root);
  HybridConfig c;
  const json* jp = &root;
  std::string where;
  // Qwen3.5-MoE (Qwen3_5MoeTextConfig): the Qwen3.5 layer layout with every FFN sparse.
  const bool all_moe = top == "qwen3_5_moe" || top == "qwen3_5_moe_text";
  if (top == "qwen3_5" || top == "qwen3_5_moe") {
    c.arch = HybridArch::qwen3_5;
    if (root.contains("text_config") && root["text_config"].is_object()) {
      jp = &root["text_config"];
      where = "text_config.";
    }
  } else if (top == "qwen3_5_text" || top == "qwen3_5_moe_text") {
    c.arch = HybridArch::qwen3_5;
  } else if (top == "qwen3_next") {
    c.arch = HybridArch::qwen3_next;
  } else {
    throw_input_error(path, "model_type",
                      "qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text or qwen3_next", "'" + top + "'");
  }
  const json& j = *jp;
  const ConfigReader r{j, path, where};
  c.n_vocab = r.positive("vocab_size");
  c.d_model = r.positive("hidden_size");
  c.n_layers = r.positive("num_hidden_layers");
  c.d_ff = all_moe ? r.uint("intermediate_size", 0) : r.positive("intermediate_size");  // no dense FFN
  c.rms_eps = static_cast<float>(r.number(j, "rms_norm_eps", 1e-6, where + "rms_norm_eps"));
  if (!(c.rms_eps > 0))
    throw_input_error(path, where + "rms_norm_eps", "a positive number", std::to_string(c.rms_eps));
  // text_config's own value, else the top level's (Qwen3.5 keeps it there), else false.
  c.tied_embeddings = r.boolean("tie_word_embeddings", ConfigReader{root, path, ""}.boolean("tie_word_embeddings", false));
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    throw_input_error(path, where + "hidden_act", "\"silu\"", j["hidden_act"].dump());
  if (r.boolean("attention_bias", false))
    throw_input_error(path, where + "attention_bias", "false (attention biases are not supported)", "true");

  // layer types: the explicit list, else every full_attention_interval-th layer is full attention
  c.full_attention.assign(c.n_layers, false);
  if (const json* lt = r.find("layer_types")) {
    if (!lt->is_array() || lt->size() != c.n_layers)
      throw_input_error(path, where + "layer_types",
                        fmt::format("a list of {} layer types (num_hidden_layers)", c.n_layers), lt->dump());
    for (std::size_t i = 0; i < c.n_layers; ++i) {
      const json& e = (*lt)[i];
      const std::string s = e.is_string() ? e.get<std::string>() : e.dump();
      if (s == "full_attention")
        c.full_attention[i] = true;
      else if (s != "linear_attention")
        throw_input_error(path, fmt::format("{}layer_types[{}]", where, i),
                          "\"linear_attention\" or \"full_attention\"", "'" + s + "'");
    }
  } else {
    const std::size_t every = r.positive("full_attention_interval", 4);
    for (std::size_t i = 0; i < c.n_layers; ++i) c.full_attention[i] = (i + 1) % every == 0;
  }
  c.lin_k_heads = r.positive("linear_num_key_heads");
  c.lin_v_heads = r.positive("linear_num_value_heads");
  c.lin_dk = r.positive("linear_key_head_dim");
  c.lin_dv = r.positive("linear_value_head_dim");
  c.conv_kernel = r.positive("linear_conv_kernel_dim", 4);
  if (c.lin_v_heads % c.lin_k_heads != 0)
    throw_input_error(path, where + "linear_num_value_heads",
                      fmt::format("a multiple of linear_num_key_heads {}", c.lin_k_heads),
                      std::to_string(c.lin_v_heads));
  c.n_heads = r.positive("num_attention_heads");
  c.n_kv_heads = r.positive("num_key_value_heads", c.n_heads);
  c.head_dim = r.positive("head_dim", c.d_model / c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    throw_input_error(path, where + "num_key_value_heads",
                      fmt::format("a divisor of num_attention_heads {}", c.n_heads),
                      std::to_string(c.n_kv_heads));

  // RoPE: rope_parameters {rope_type, rope_theta, partial_rotary_factor} (transformers 5) or top-level keys
  static const json kEmpty = json::object();
  const json& rp = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? j["rope_parameters"]
                   : j.contains("rope_scaling") && j["rope_scaling"].is_object()     ? j["rope_scaling"]
                                                                                     : kEmpty;
  const std::string rf = where + "rope_parameters.";
  std::string rope_type = "default";
  for (const char* key : {"rope_type", "type"})
    if (rp.contains(key) && rp[key].is_string()) rope_type = rp[key].get<std::string>();
  if (rope_type != "default")
    throw_input_error(path, rf + "rope_type", "\"default\" (text-only M-RoPE reduces to it)",
                      "'" + rope_type + "'");
  c.rope.theta =
      r.number(rp, "rope_theta", r.number(j, "rope_theta", 10000.0, where + "rope_theta"), rf + "rope_theta");
  const double partial = r.number(rp, "partial_rotary_factor",
                                  r.number(j, "partial_rotary_factor", 0.25, where + "partial_rotary_factor"),
                                  rf + "partial_rotary_factor");
  c.rot_dim = static_cast<std::size_t>(static_cast<double>(c.head_dim) * partial);
  if (!(c.rope.theta > 0))
    throw_input_error(path, rf + "rope_theta", "a positive number", std::to_string(c.rope.theta));
  if (!(partial > 0 && partial <= 1) || c.rot_dim == 0 || c.rot_dim % 2 != 0)
    throw_input_error(path, rf + "partial_rotary_factor",
                      fmt::format("a factor in (0, 1] giving an even rotary dim of head_dim {}", c.head_dim),
                      fmt::format("{} (rotary dim {})", partial, c.rot_dim));

  // MoE. Qwen3-Next: layer i sparse iff i ∉ mlp_only_layers, num_experts > 0, (i+1) % decoder_sparse_step
  // == 0. Qwen3.5-MoE: every layer sparse and the top-k always renormalised (Qwen3_5MoeTopKRouter ignores
  // norm_topk_prob, decoder_sparse_step and mlp_only_layers).
  c.moe.assign(c.n_layers, false);
  auto read_expert_sizes = [&] {  // shared by both MoE layouts
    c.top_k = r.positive("num_experts_per_tok");
    if (c.top_k > c.n_experts)
      throw_input_error(path, where + "num_experts_per_tok",
                        fmt::format("at most num_experts {}", c.n_experts), std::to_string(c.top_k));
    c.moe_ff = r.positive("moe_intermediate_size");
    c.shared_ff = r.positive("shared_expert_intermediate_size");
  };
  if (all_moe) {
    c.n_experts = r.positive("num_experts");
    c.moe.assign(c.n_layers, true);
    read_expert_sizes();
    c.norm_topk = true;
  } else if (c.arch == HybridArch::qwen3_next) {
    c.n_experts = r.uint("num_experts", 0);
    if (c.n_experts > 0) {
      const std::size_t step = r.positive("decoder_sparse_step", 1);
      std::vector<bool> only(c.n_layers, false);
      if (const json* m = r.find("mlp_only_layers")) {
        if (!m->is_array())
          throw_input_error(path, where + "mlp_only_layers", "a list of layer indices", m->dump());
        for (const auto& e : *m) {
          if (!e.is_number_unsigned() || e.get<std::size_t>() >= c.n_layers)
            throw_input_error(path, where + "mlp_only_layers", fmt::format("layer indices < {}", c.n_layers),
                              e.dump());
          only[e.get<std::size_t>()] = true;
        }
      }
      for (std::size_t i = 0; i < c.n_layers; ++i) c.moe[i] = !only[i] && (i + 1) % step == 0;
      read_expert_sizes();
      c.norm_topk = r.boolean("norm_topk_prob", true);
    }
  }
  c.weight_prefix =
      ck.contains("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  return c;
}

}  // namespace

bool HybridModel::is_hybrid_model_type(const std::string& t) {
  return t == "qwen3_5" || t == "qwen3_5_text" || t == "qwen3_5_moe" || t == "qwen3_5_moe_text" ||
         t == "qwen3_next";
}

HybridModel HybridModel::load(const std::string& dir) {
  const HfCheckpoint ck = HfCheckpoint::open(dir);
  const std::string cfg_path = (std::filesystem::path(dir) / "config.json").string();
  HybridModel m;
  HybridConfig& c = m.config_;
  c = parse_config(ck.config(), cfg_path, ck);
  const std::string kind = m.architecture();

  auto get = [&](const std::string& name, const Shape& shape) {
    if (!ck.contains(name))
      throw_input_error(ck.dir(), "tensor '" + name + "'",
                        fmt::format("present ({} checkpoint, shape {})", kind, shape_text(shape)), "missing");
    const Shape got = ck.shape(name);
    if (got != shape)
      throw_input_error(ck.dir(), "tensor '" + name + "': shape", shape_text(shape), shape_text(got));
    return ck.tensor_f32(name, shape);
  };
  const auto I = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  const std::int64_t D = I(c.d_model), V = I(c.n_vocab), F = I(c.d_ff), hd = I(c.head_dim);
  const std::int64_t KD = I(c.key_dim()), VD = I(c.value_dim()), CD = I(c.conv_dim()), Hv = I(c.lin_v_heads);
  const std::int64_t Hk = I(c.lin_k_heads), dk = I(c.lin_dk), dv = I(c.lin_dv), rr = Hv / Hk;
  const std::int64_t qs = I(c.n_heads) * hd, kvs = I(c.n_kv_heads) * hd;
  const std::string& P = c.weight_prefix;

  m.embed_ = get(P + "embed_tokens.weight", {V, D});
  m.layers_.resize(c.n_layers);
  for (std::size_t il = 0; il < c.n_layers; ++il) {
    auto& l = m.layers_[il];
    const std::string p = fmt::format("{}layers.{}.", P, il);
    l.in_norm = get(p + "input_layernorm.weight", {D});
    l.post_norm = get(p + "post_attention_layernorm.weight", {D});
    if (!c.full_attention[il]) {
      const std::string la = p + "linear_attn.";
      if (ck.contains(p + "self_attn.q_proj.weight") && !ck.contains(la + "out_proj.weight"))
        throw_input_error(ck.dir(), fmt::format("layer {} type", il),
                          "linear_attention (as config.json layer_types says)",
                          "a full-attention layer's tensors");
      if (c.arch == HybridArch::qwen3_5) {
        l.w_in = get(la + "in_proj_qkv.weight", {CD, D});
        const auto z = get(la + "in_proj_z.weight", {VD, D});
        l.w_in.insert(l.w_in.end(), z.begin(), z.end());
        l.w_ba = get(la + "in_proj_b.weight", {Hv, D});
        const auto a = get(la + "in_proj_a.weight", {Hv, D});
        l.w_ba.insert(l.w_ba.end(), a.begin(), a.end());
      } else {
        // Qwen3-Next groups rows per key head g: [q_g (dk) | k_g (dk) | v of heads g·r… (r·dv) | z (r·dv)]
        // and [b (r) | a (r)]; regroup to [Q | K | V | Z] and [b | a] (fix_query_key_value_ordering).
        const auto w = get(la + "in_proj_qkvz.weight", {2 * KD + 2 * VD, D});
        const auto ba = get(la + "in_proj_ba.weight", {2 * Hv, D});
        l.w_in.resize(w.size()), l.w_ba.resize(ba.size());
        const std::int64_t grp = 2 * dk + 2 * rr * dv;
        auto row = [&](std::vector<float>& dst, std::int64_t to, const std::vector<float>& src,
                       std::int64_t from) { std::copy_n(src.begin() + from * D, D, dst.begin() + to * D); };
        for (std::int64_t g = 0; g < Hk; ++g) {
          for (std::int64_t i = 0; i < dk; ++i) {
            row(l.w_in, g * dk + i, w, g * grp + i);
            row(l.w_in, KD + g * dk + i, w, g * grp + dk + i);
          }
          for (std::int64_t i = 0; i < rr * dv; ++i) {
            row(l.w_in, 2 * KD + g * rr * dv + i, w, g * grp + 2 * dk + i);
            row(l.w_in, CD + g * rr * dv + i, w, g * grp + 2 * dk + rr * dv + i);
          }
          for (std::int64_t j = 0; j < rr; ++j) {
            row(l.w_ba, g * rr + j, ba, g * 2 * rr + j);
            row(l.w_ba, Hv + g * rr + j, ba, g * 2 * rr + rr + j);
          }
        }
      }
      l.conv = get(la + "conv1d.weight", {CD, 1, I(c.conv_kernel)});
      l.dt_bias = get(la + "dt_bias", {Hv});
      l.A_log = get(la + "A_log", {Hv});
      l.gdn_norm = get(la + "norm.weight", {dv});
      l.w_out = get(la + "out_proj.weight", {D, VD});
    } else {
      const std::string sa = p + "self_attn.";
      if (ck.contains(p + "linear_attn.out_proj.weight") && !ck.contains(sa + "q_proj.weight"))
        throw_input_error(ck.dir(), fmt::format("layer {} type", il),
                          "full_attention (as config.json layer_types says)",
                          "a linear-attention layer's tensors");
      l.wq = get(sa + "q_proj.weight", {2 * qs, D});
      l.wk = get(sa + "k_proj.weight", {kvs, D});
      l.wv = get(sa + "v_proj.weight", {kvs, D});
      l.wo = get(sa + "o_proj.weight", {D, qs});
      l.q_norm = get(sa + "q_norm.weight", {hd});
      l.k_norm = get(sa + "k_norm.weight", {hd});
    }
    const std::string mp = p + "mlp.";
    if (!c.moe[il]) {
      l.w_gate = get(mp + "gate_proj.weight", {F, D});
      l.w_up = get(mp + "up_proj.weight", {F, D});
      l.w_down = get(mp + "down_proj.weight", {D, F});
    } else {
      const std::int64_t E = I(c.n_experts), Im = I(c.moe_ff), Is = I(c.shared_ff);
      l.router = get(mp + "gate.weight", {E, D});
      if (ck.contains(mp + "experts.gate_up_proj") || !ck.contains(mp + "experts.0.gate_proj.weight")) {
        l.ex_gate_up = get(mp + "experts.gate_up_proj", {E, 2 * Im, D});
        l.ex_down = get(mp + "experts.down_proj", {E, D, Im});
      } else {  // per-expert tensors (original release layout): fuse as transformers 5 does
        for (std::int64_t e = 0; e < E; ++e) {
          const std::string ep = fmt::format("{}experts.{}.", mp, e);
          for (const char* part : {"gate_proj.weight", "up_proj.weight"}) {
            const auto t = get(ep + part, {Im, D});
            l.ex_gate_up.insert(l.ex_gate_up.end(), t.begin(), t.end());
          }
          const auto d = get(ep + "down_proj.weight", {D, Im});
          l.ex_down.insert(l.ex_down.end(), d.begin(), d.end());
        }
      }
      l.sh_gate = get(mp + "shared_expert.gate_proj.weight", {Is, D});
      l.sh_up = get(mp + "shared_expert.up_proj.weight", {Is, D});
      l.sh_down = get(mp + "shared_expert.down_proj.weight", {D, Is});
      l.sh_gate_w = get(mp + "shared_expert_gate.weight", {1, D});
    }
  }
  m.final_norm_ = get(P + "norm.weight", {D});
  if (!c.tied_embeddings) m.lm_head_ = get("lm_head.weight", {V, D});
  m.inv_freq_ = engine::rope_inv_freq(c.rope, c.rot_dim);
  return m;
}

}  // namespace kc
