// Loading a Llama-family model: config from GGUF metadata or HF config.json, weights through a
// WeightSource (HF names and shapes), every tensor checked for presence and shape.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "numeric/formats.h"

namespace kc {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

LlamaArch parse_arch(const std::string& name, const std::string& path, const std::string& field) {
  if (name == "llama") return LlamaArch::llama;
  if (name == "qwen2") return LlamaArch::qwen2;
  if (name == "qwen3") return LlamaArch::qwen3;
  throw_input_error(path, field, "a supported architecture (llama, qwen2, qwen3)", "'" + name + "'");
}

void apply_arch_traits(LlamaConfig& c) {
  c.qkv_bias = c.arch == LlamaArch::qwen2;
  c.qk_norm = c.arch == LlamaArch::qwen3;
}

void check_config(const LlamaConfig& c, const std::string& path) {
  auto positive = [&](std::size_t v, const char* field) {
    if (v == 0) throw_input_error(path, field, "a positive integer", "0");
  };
  positive(c.n_vocab, "vocab_size"), positive(c.d_model, "hidden_size"),
      positive(c.n_layers, "num_hidden_layers");
  positive(c.n_heads, "num_attention_heads"), positive(c.n_kv_heads, "num_key_value_heads");
  positive(c.head_dim, "head_dim"), positive(c.d_ff, "intermediate_size");
  if (c.n_heads % c.n_kv_heads != 0)
    throw_input_error(path, "num_key_value_heads",
                      fmt::format("a divisor of num_attention_heads {}", c.n_heads),
                      std::to_string(c.n_kv_heads));
  if (c.head_dim % 2 != 0) throw_input_error(path, "head_dim", "an even number", std::to_string(c.head_dim));
  if (!(c.rms_eps > 0))
    throw_input_error(path, "rms_norm_eps", "a positive number", fmt::format("{}", c.rms_eps));
  if (!(c.rope.theta > 0))
    throw_input_error(path, "rope_theta", "a positive number", fmt::format("{}", c.rope.theta));
  if (c.rope.scaling != engine::RopeScaling::none && !(c.rope.factor > 0))
    throw_input_error(path, "rope factor", "a positive number", fmt::format("{}", c.rope.factor));
}

// ============================================================================================ HF
std::uint64_t json_uint(const json& j, const std::string& key, const std::string& path,
                        std::optional<std::uint64_t> fallback = std::nullopt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    throw_input_error(path, key, "a non-negative integer", "missing");
  }
  if (!it->is_number_unsigned()) throw_input_error(path, key, "a non-negative integer", it->dump());
  return it->get<std::uint64_t>();
}

double json_number(const json& j, const std::string& key, const std::string& path,
                   std::optional<double> fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    throw_input_error(path, key, "a number", "missing");
  }
  if (!it->is_number()) throw_input_error(path, key, "a number", it->dump());
  return it->get<double>();
}

bool json_bool(const json& j, const std::string& key, const std::string& path, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw_input_error(path, key, "true or false", it->dump());
  return it->get<bool>();
}

// transformers 5 writes rope_parameters {rope_type, rope_theta, factor, …}; 4.x wrote rope_theta and an
// optional rope_scaling {rope_type|type, factor, …}.
engine::RopeParams parse_hf_rope(const json& j, const std::string& path) {
  engine::RopeParams r;
  const json* rp = nullptr;
  std::string field = "rope_parameters";
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    rp = &j["rope_parameters"];
  } else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    rp = &j["rope_scaling"];
    field = "rope_scaling";
  }
  r.theta = json_number(j, "rope_theta", path, 10000.0);
  if (!rp) return r;
  r.theta = json_number(*rp, "rope_theta", path, r.theta);
  std::string type = "default";
  for (const char* key : {"rope_type", "type"})
    if (rp->contains(key) && (*rp)[key].is_string()) type = (*rp)[key].get<std::string>();
  if (type == "default") return r;
  r.factor = json_number(*rp, "factor", path + ": " + field, std::nullopt);
  if (type == "linear") {
    r.scaling = engine::RopeScaling::linear;
  } else if (type == "llama3") {
    r.scaling = engine::RopeScaling::llama3;
    r.low_freq_factor = json_number(*rp, "low_freq_factor", path + ": " + field, std::nullopt);
    r.high_freq_factor = json_number(*rp, "high_freq_factor", path + ": " + field, std::nullopt);
    r.original_max_position =
        json_number(*rp, "original_max_position_embeddings", path + ": " + field, std::nullopt);
  } else {
    throw_input_error(path, field + ".rope_type", "default, linear or llama3", "'" + type + "'");
  }
  return r;
}

// An HF checkpoint: model.safetensors or shards listed in model.safetensors.index.json.
class HfSource : public WeightSource {
 public:
  explicit HfSource(const fs::path& dir) : path_(dir.string()) {
    const fs::path index = dir / "model.safetensors.index.json";
    if (fs::exists(index)) {
      const std::string text = read_text_file(index.string(), kConfigTextCap, "a safetensors index");
      json j;
      try {
        j = json::parse(text);
      } catch (const std::exception& e) {
        throw_input_error(index.string(), "json", "valid JSON", e.what());
      }
      if (!j.contains("weight_map") || !j["weight_map"].is_object())
        throw_input_error(index.string(), "weight_map", "an object {tensor: shard file}", "missing");
      std::map<std::string, std::size_t> shard_of_file;
      for (auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string())
          throw_input_error(index.string(), "weight_map." + name, "a file name", file.dump());
        const std::string f = file.get<std::string>();
        if (!shard_of_file.count(f)) {
          shard_of_file[f] = shards_.size();
          shards_.push_back(SafetensorsFile::open((dir / f).string()));
        }
        where_[name] = shard_of_file[f];
      }
    } else {
      shards_.push_back(SafetensorsFile::open((dir / "model.safetensors").string()));
      for (const auto& n : shards_[0].names()) where_[n] = 0;
    }
  }
  const std::string& path() const override { return path_; }
  std::optional<std::vector<std::int64_t>> shape(const std::string& name) const override {
    auto it = where_.find(name);
    if (it == where_.end() || !shards_[it->second].contains(name)) return std::nullopt;
    return shards_[it->second].tensor(name).shape;
  }
  void read_f32(const std::string& name, std::span<float> out) const override {
    const auto& shard = shards_[where_.at(name)];
    const Tensor t = shard.tensor(name);
    KC_ASSERT(t.numel() == out.size(), "{}: {} numel {} != {}", shard.path(), name, t.numel(), out.size());
    const auto* b = t.bytes.data();
    switch (t.dtype) {
      case DType::float32:
        std::memcpy(out.data(), b, out.size() * 4);
        break;
      case DType::float16:
      case DType::bfloat16:
        for (std::size_t i = 0; i < out.size(); ++i) {
          std::uint16_t h;
          std::memcpy(&h, b + 2 * i, 2);
          out[i] = t.dtype == DType::float16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        break;
      default:
        throw_input_error(shard.path(), "tensor " + name + ": dtype", "F32, F16 or BF16",
                          dtype_name(t.dtype));
    }
  }

 private:
  std::string path_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, std::size_t> where_;
};

LlamaConfig config_from_hf_json(const json& j, const std::string& path) {
  LlamaConfig c;
  if (!j.contains("model_type") || !j["model_type"].is_string())
    throw_input_error(path, "model_type", "a string (llama, qwen2, qwen3)",
                      j.contains("model_type") ? j["model_type"].dump() : "missing");
  c.arch = parse_arch(j["model_type"].get<std::string>(), path, "model_type");
  apply_arch_traits(c);
  c.n_vocab = json_uint(j, "vocab_size", path);
  c.d_model = json_uint(j, "hidden_size", path);
  c.n_layers = json_uint(j, "num_hidden_layers", path);
  c.n_heads = json_uint(j, "num_attention_heads", path);
  c.n_kv_heads = json_uint(j, "num_key_value_heads", path, c.n_heads);
  c.d_ff = json_uint(j, "intermediate_size", path);
  c.head_dim = json_uint(j, "head_dim", path, c.n_heads ? c.d_model / c.n_heads : 0);
  c.n_ctx_train = json_uint(j, "max_position_embeddings", path, 0);
  c.rms_eps = static_cast<float>(json_number(j, "rms_norm_eps", path, 1e-6));
  c.rope = parse_hf_rope(j, path);
  c.tied_embeddings = json_bool(j, "tie_word_embeddings", path, false);
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    throw_input_error(path, "hidden_act", "\"silu\"", j["hidden_act"].dump());
  if (json_bool(j, "attention_bias", path, false))
    throw_input_error(path, "attention_bias", "false (attention biases are not supported)", "true");
  if (json_bool(j, "mlp_bias", path, false))
    throw_input_error(path, "mlp_bias", "false (MLP biases are not supported)", "true");
  if (json_bool(j, "use_sliding_window", path, false))
    throw_input_error(path, "use_sliding_window", "false (sliding-window attention is not supported)",
                      "true");
  if (j.contains("partial_rotary_factor") && json_number(j, "partial_rotary_factor", path, 1.0) != 1.0)
    throw_input_error(path, "partial_rotary_factor", "1 (full rotary)", j["partial_rotary_factor"].dump());
  check_config(c, path);
  return c;
}

// ============================================================================================ GGUF
// HF name → GGUF name (llama.cpp convert_hf_to_gguf tensor map).
std::string gguf_name(const std::string& hf) {
  static const std::map<std::string, std::string> top{{"model.embed_tokens.weight", "token_embd.weight"},
                                                      {"model.norm.weight", "output_norm.weight"},
                                                      {"lm_head.weight", "output.weight"}};
  static const std::map<std::string, std::string> per_layer{
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  if (auto it = top.find(hf); it != top.end()) return it->second;
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) == 0) {
    const auto dot = hf.find('.', prefix.size());
    if (dot != std::string::npos)
      if (auto it = per_layer.find(hf.substr(dot + 1)); it != per_layer.end())
        return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + it->second;
  }
  return {};
}

class GgufSource : public WeightSource {
 public:
  GgufSource(std::shared_ptr<const GgufFile> file, const LlamaConfig& c, bool unpermute)
      : file_(std::move(file)),
        n_heads_(c.n_heads),
        n_kv_heads_(c.n_kv_heads),
        head_dim_(c.head_dim),
        d_model_(c.d_model),
        unpermute_(unpermute) {}
  const std::string& path() const override { return file_->path(); }
  std::string display_name(const std::string& name) const override {
    const std::string g = gguf_name(name);
    return g.empty() ? "'" + name + "'" : "'" + g + "' (" + name + ")";
  }
  std::optional<std::vector<std::int64_t>> shape(const std::string& name) const override {
    const auto* t = file_->find_tensor(gguf_name(name));
    if (!t) return std::nullopt;
    return t->shape();
  }
  void read_f32(const std::string& name, std::span<float> out) const override {
    file_->dequantize_into(file_->tensor_info(gguf_name(name)), out);
    if (!unpermute_) return;
    if (name.ends_with("self_attn.q_proj.weight")) unpermute_rows(out, n_heads_);
    if (name.ends_with("self_attn.k_proj.weight")) unpermute_rows(out, n_kv_heads_);
  }

 private:
  // llama.cpp's converter reorders each head's rows (two, i) → (i, two) so that adjacent pairs rotate
  // together; HF row h·hd + two·hd/2 + i comes from GGUF row h·hd + 2i + two.
  void unpermute_rows(std::span<float> w, std::size_t n_head) const {
    const std::size_t hd = head_dim_, half = hd / 2, cols = d_model_;
    KC_ASSERT(w.size() == n_head * hd * cols, "unpermute: {} != {}·{}·{}", w.size(), n_head, hd, cols);
    const std::vector<float> src(w.begin(), w.end());
    for (std::size_t h = 0; h < n_head; ++h)
      for (std::size_t two = 0; two < 2; ++two)
        for (std::size_t i = 0; i < half; ++i)
          std::memcpy(&w[(h * hd + two * half + i) * cols], &src[(h * hd + 2 * i + two) * cols],
                      cols * sizeof(float));
  }

  std::shared_ptr<const GgufFile> file_;
  std::size_t n_heads_, n_kv_heads_, head_dim_, d_model_;
  bool unpermute_;
};

// GGUF row of HF row r after unpermute_rows: HF row h·hd + two·hd/2 + i is GGUF row h·hd + 2i + two.
std::vector<std::uint32_t> unpermute_map(std::size_t n_head, std::size_t hd) {
  std::vector<std::uint32_t> map(n_head * hd);
  const std::size_t half = hd / 2;
  for (std::size_t h = 0; h < n_head; ++h)
    for (std::size_t two = 0; two < 2; ++two)
      for (std::size_t i = 0; i < half; ++i)
        map[h * hd + two * half + i] = static_cast<std::uint32_t>(h * hd + 2 * i + two);
  return map;
}

// The decode path's view of the file's matrices (from_source has checked every tensor's presence and
// shape). Matrices of other types stay empty (f32 path); nullptr when none qualifies.
std::shared_ptr<const LlamaQuantWeights> quant_weights(const std::shared_ptr<const GgufFile>& file,
                                                       const LlamaConfig& c, bool unpermute) {
  auto q = std::make_shared<LlamaQuantWeights>();
  bool any = false;
  auto matrix = [&](const std::string& name) {
    const GgufTensorInfo& t = file->tensor_info(name);
    QuantMatrix m;
    if (!quant_gemv_supported(t.type) || t.ne.size() != 2) return m;
    m.type = t.type;
    m.data = file->tensor_data(t).data();
    m.cols = t.ne[0], m.rows = t.ne[1];
    const GgmlTypeInfo& info = ggml_type_info(t.type);
    m.row_bytes = m.cols / info.block_size * info.type_size;
    any = true;
    return m;
  };
  q->layers.resize(c.n_layers);
  for (std::size_t il = 0; il < c.n_layers; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    auto& l = q->layers[il];
    l.wq = matrix(p + "attn_q.weight"), l.wk = matrix(p + "attn_k.weight"),
    l.wv = matrix(p + "attn_v.weight");
    l.wo = matrix(p + "attn_output.weight");
    l.w_gate = matrix(p + "ffn_gate.weight"), l.w_up = matrix(p + "ffn_up.weight");
    l.w_down = matrix(p + "ffn_down.weight");
  }
  q->lm_head = matrix(c.tied_embeddings ? "token_embd.weight" : "output.weight");
  if (!any) return nullptr;
  if (unpermute) {
    q->q_rows = unpermute_map(c.n_heads, c.head_dim);
    q->k_rows = unpermute_map(c.n_kv_heads, c.head_dim);
  }
  q->file = file;
  return q;
}

LlamaConfig config_from_gguf(const GgufFile& g, bool adjacent_pairs) {
  const std::string& path = g.path();
  const std::string arch(g.get_string("general.architecture"));
  LlamaConfig c;
  c.arch = parse_arch(arch, path, "general.architecture");
  apply_arch_traits(c);
  auto key = [&](const char* k) { return arch + "." + k; };
  c.d_model = g.get_uint(key("embedding_length"));
  c.n_layers = g.get_uint(key("block_count"));
  c.d_ff = g.get_uint(key("feed_forward_length"));
  c.n_heads = g.get_uint(key("attention.head_count"));
  c.n_kv_heads = g.find_uint(key("attention.head_count_kv")).value_or(c.n_heads);
  c.head_dim = g.find_uint(key("attention.key_length")).value_or(c.n_heads ? c.d_model / c.n_heads : 0);
  if (auto vl = g.find_uint(key("attention.value_length")); vl && *vl != c.head_dim)
    throw_input_error(path, key("attention.value_length"), fmt::format("{} (= key_length)", c.head_dim),
                      std::to_string(*vl));
  c.n_ctx_train = g.find_uint(key("context_length")).value_or(0);
  c.rms_eps = static_cast<float>(g.get_float(key("attention.layer_norm_rms_epsilon")));
  c.rope.theta = g.contains(key("rope.freq_base")) ? g.get_float(key("rope.freq_base")) : 10000.0;
  if (auto rd = g.find_uint(key("rope.dimension_count")); rd && *rd != c.head_dim)
    throw_input_error(path, key("rope.dimension_count"),
                      fmt::format("{} (full rotary, = head dim)", c.head_dim), std::to_string(*rd));
  const std::string scaling(g.find_string(key("rope.scaling.type")).value_or("none"));
  if (scaling == "linear") {
    c.rope.scaling = engine::RopeScaling::linear;
    c.rope.factor = g.get_float(key("rope.scaling.factor"));
  } else if (scaling != "none") {
    throw_input_error(path, key("rope.scaling.type"), "none or linear", "'" + scaling + "'");
  }
  if (g.find_tensor("rope_freqs.weight"))
    throw_input_error(path, "tensor 'rope_freqs.weight'",
                      "absent (per-dim RoPE frequency factors are not supported)", "present");
  const auto& embd = g.tensor_info("token_embd.weight");
  const auto shape = embd.shape();
  if (shape.size() != 2 || shape[1] != static_cast<std::int64_t>(c.d_model))
    throw_input_error(path, "tensor 'token_embd.weight': shape", fmt::format("[n_vocab, {}]", c.d_model),
                      shape_text(shape));
  c.n_vocab = static_cast<std::size_t>(shape[0]);
  c.tied_embeddings = g.find_tensor("output.weight") == nullptr;
  // Only llama's converter permutes Q/K for adjacent pairs; qwen2/qwen3 GGUFs keep HF order (NEOX RoPE).
  c.rope_style =
      c.arch == LlamaArch::llama && adjacent_pairs ? RopeStyle::adjacent_pairs : RopeStyle::rotate_half;
  check_config(c, path);
  return c;
}

}  // namespace

LlamaConfig llama_config_from_hf_json(const std::string& json_text, const std::string& path) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const std::exception& e) {
    throw_input_error(path, "json", "valid JSON", e.what());
  }
  if (!j.is_object()) throw_input_error(path, "json", "an object", j.type_name());
  return config_from_hf_json(j, path);
}

LlamaModel LlamaModel::from_source(const LlamaConfig& c, const WeightSource& src) {
  using Shape = std::vector<std::int64_t>;
  // Reads `name` into `out` (resized to its shape) after checking the shape.
  auto read = [&](const std::string& name, const Shape& shape, std::vector<float>& out) {
    const auto got = src.shape(name);
    if (!got)
      throw_input_error(
          src.path(), "tensor " + src.display_name(name),
          fmt::format("present ({} checkpoint, shape {})", llama_arch_name(c.arch), shape_text(shape)),
          "missing");
    if (*got != shape)
      throw_input_error(src.path(), "tensor " + src.display_name(name) + ": shape", shape_text(shape),
                        shape_text(*got));
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    out.resize(n);
    src.read_f32(name, out);
  };
  auto get = [&](const std::string& name, const Shape& shape) {
    std::vector<float> out;
    read(name, shape, out);
    return out;
  };
  const auto D = static_cast<std::int64_t>(c.d_model), V = static_cast<std::int64_t>(c.n_vocab),
             F = static_cast<std::int64_t>(c.d_ff), hd = static_cast<std::int64_t>(c.head_dim),
             qs = static_cast<std::int64_t>(c.n_heads) * hd,
             kvs = static_cast<std::int64_t>(c.n_kv_heads) * hd;
  LlamaModel m;
  m.config_ = c;
  LlamaWeights& w = m.weights_;
  // Matrices are packed as they are read, through one reused row-major buffer (a fresh vector per layer
  // matrix left ~20 MB of freed heap in RSS). Tied: the packed LM head is the embedding (rows looked up
  // from it), so it is held once.
  std::vector<float> buf;
  auto packed = [&](const std::string& name, std::int64_t rows, std::int64_t cols) {
    read(name, {rows, cols}, buf);
    return engine::PackedMatrix(buf.data(), static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  };
  if (c.tied_embeddings)
    w.lm_head = packed("model.embed_tokens.weight", V, D);
  else
    w.embed = get("model.embed_tokens.weight", {V, D});
  std::vector<float>().swap(buf);  // the [V, D] buffer goes back now; the layers' matrices are far smaller
  w.layers.resize(c.n_layers);
  for (std::size_t il = 0; il < c.n_layers; ++il) {
    const std::string p = fmt::format("model.layers.{}.", il);
    auto& l = w.layers[il];
    l.attn_norm = get(p + "input_layernorm.weight", {D});
    l.wq = packed(p + "self_attn.q_proj.weight", qs, D);
    l.wk = packed(p + "self_attn.k_proj.weight", kvs, D);
    l.wv = packed(p + "self_attn.v_proj.weight", kvs, D);
    if (c.qkv_bias) {
      l.bq = get(p + "self_attn.q_proj.bias", {qs});
      l.bk = get(p + "self_attn.k_proj.bias", {kvs});
      l.bv = get(p + "self_attn.v_proj.bias", {kvs});
    }
    if (c.qk_norm) {
      l.q_norm = get(p + "self_attn.q_norm.weight", {hd});
      l.k_norm = get(p + "self_attn.k_norm.weight", {hd});
    }
    l.wo = packed(p + "self_attn.o_proj.weight", D, qs);
    l.mlp_norm = get(p + "post_attention_layernorm.weight", {D});
    l.w_gate = packed(p + "mlp.gate_proj.weight", F, D);
    l.w_up = packed(p + "mlp.up_proj.weight", F, D);
    l.w_down = packed(p + "mlp.down_proj.weight", D, F);
  }
  w.final_norm = get("model.norm.weight", {D});
  std::vector<float>().swap(buf);
  if (!c.tied_embeddings) w.lm_head = packed("lm_head.weight", V, D);
  m.inv_freq_ = engine::rope_inv_freq(c.rope, c.head_dim);
  return m;
}

LlamaModel LlamaModel::load(const std::string& path, const LlamaLoadOptions& opt) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    const fs::path cfg = p / "config.json";
    const LlamaConfig c =
        llama_config_from_hf_json(read_text_file(cfg.string(), kConfigTextCap, "a config.json"), cfg.string());
    HfSource src(p);
    return from_source(c, src);
  }
  if (p.filename() == "config.json") return load(p.parent_path().string(), opt);
  std::ifstream in(p, std::ios::binary);
  if (!in) throw_input_error(path, "path", "a .gguf file or an HF checkpoint folder", "cannot open");
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() != 4 || std::memcmp(magic, "GGUF", 4) != 0)
    throw_input_error(path, "format", "a GGUF file (magic 'GGUF') or an HF checkpoint folder", "neither");
  auto g = std::make_shared<const GgufFile>(GgufFile::open(path));
  const LlamaConfig c = config_from_gguf(*g, opt.gguf_adjacent_pairs);
  const bool unpermute = c.arch == LlamaArch::llama && c.rope_style == RopeStyle::rotate_half;
  GgufSource src(g, c, unpermute);
  LlamaModel m = from_source(c, src);
  m.quant_ = quant_weights(g, c, unpermute);
  return m;
}

}  // namespace kc
