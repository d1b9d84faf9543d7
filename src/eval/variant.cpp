#include "eval/variant.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "numeric/formats.h"

namespace kc {

namespace {

constexpr const char* kSyntax =
    "terms joined by '+': f32 | bf16 | p=f32|bf16|f16|fp8|fp8x448|fp8x256 | kv=DTYPE | attn=exact|flash | "
    "gdn=f32|fla | "
    "round:NAME[@LAYER]=BITS (BITS 0…23), e.g. bf16+p=fp8x448+round:mlp.out=5";

constexpr const char* kPNames[] = {"f32", "bf16", "f16", "fp8", "fp8x448", "fp8x256"};

[[noreturn]] void bad_term(std::string_view field, std::string_view spec, std::string_view term,
                           std::string_view why) {
  fail("{}: '{}': term '{}': {}; expected {}", field, spec, term, why, kSyntax);
}

bool parse_int(std::string_view s, int& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool valid_tensor_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_'))
      return false;
  return true;
}

std::string kv_name(DType d) {
  switch (d) {
    case DType::float32:
      return "f32";
    case DType::bfloat16:
      return "bf16";
    case DType::float16:
      return "f16";
    case DType::float8_e4m3fn:
      return "fp8";
    default:
      return dtype_name(d);
  }
}

std::string round_term(const TensorRounding& r) {
  return r.layer < 0 ? fmt::format("round:{}={}", r.name, r.bits)
                     : fmt::format("round:{}@{}={}", r.name, r.layer, r.bits);
}

std::vector<std::string> terms_of(const Variant& v) {
  std::vector<std::string> t;
  if (v.bf16_base) t.push_back("bf16");
  if (v.p && *v.p != "f32") t.push_back("p=" + *v.p);
  if (v.kv && *v.kv != DType::float32) t.push_back("kv=" + kv_name(*v.kv));
  if (v.attention == engine::AttentionKernel::flash) t.push_back("attn=flash");
  if (v.gdn_fla) t.push_back("gdn=fla");
  for (const auto& r : v.round) t.push_back(round_term(r));
  std::sort(t.begin(), t.end());
  return t;
}

// Activations that the bf16 base leaves in f32: P (its own term), the logits, recurrent state.
bool bf16_activation(std::string_view name) {
  if (name == "attn.p" || name == "logits") return false;
  if (name.substr(0, 4) == "gdn." && name.find("state") != std::string_view::npos) return false;
  return true;
}

// Element-wise rounding of a big tensor in fixed chunks on the pool (same bits for any thread count).
// Only from the calling thread: parallel_for does not nest, and attn.p arrives from worker threads.
template <class Fn>
void for_chunks(float* x, std::size_t n, bool may_parallel, const Fn& fn) {
  constexpr std::size_t kChunk = 1 << 16;
  if (!may_parallel || n <= kChunk) return fn(x, n);
  parallel_for(n, kChunk, [&](std::size_t, std::size_t b, std::size_t e) { fn(x + b, e - b); });
}

}  // namespace

bool Variant::is_reference() const {
  if (bf16_base || gdn_fla || attention != engine::AttentionKernel::exact) return false;
  if (p && *p != "f32") return false;
  if (kv && *kv != DType::float32) return false;
  for (const auto& r : round)
    if (r.bits < 23) return false;
  return true;
}

Variant parse_variant(std::string_view spec, std::string_view field) {
  Variant v;
  if (spec.empty()) return v;
  bool f32_base = false, attn_set = false, gdn_set = false;
  std::size_t b = 0;
  while (true) {
    const std::size_t e = spec.find('+', b);
    const std::string_view term =
        spec.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
    if (term.empty()) bad_term(field, spec, term, "empty term");
    if (term == "f32") {
      if (f32_base) bad_term(field, spec, term, "given twice");
      f32_base = true;
    } else if (term == "bf16") {
      if (v.bf16_base) bad_term(field, spec, term, "given twice");
      v.bf16_base = true;
    } else if (term.substr(0, 2) == "p=") {
      const std::string_view d = term.substr(2);
      if (v.p) bad_term(field, spec, term, "p= given twice");
      if (std::find(std::begin(kPNames), std::end(kPNames), d) == std::end(kPNames))
        bad_term(field, spec, term, "unknown P precision (f32, bf16, f16, fp8, fp8x448, fp8x256)");
      v.p = std::string(d);
    } else if (term.substr(0, 3) == "kv=") {
      const std::string_view d = term.substr(3);
      if (v.kv) bad_term(field, spec, term, "kv= given twice");
      std::optional<DType> dt = d == "fp8" ? std::optional<DType>(DType::float8_e4m3fn) : parse_dtype(d);
      if (!dt || !is_float(*dt) || *dt == DType::float64 || *dt == DType::float8_e8m0)
        bad_term(field, spec, term,
                 "expected a float dtype up to 32 bits with a sign (f32, bf16, f16, fp8, e5m2, …)");
      v.kv = *dt;
    } else if (term.substr(0, 5) == "attn=") {
      const std::string_view k = term.substr(5);
      if (attn_set) bad_term(field, spec, term, "attn= given twice");
      attn_set = true;
      if (k == "exact")
        v.attention = engine::AttentionKernel::exact;
      else if (k == "flash")
        v.attention = engine::AttentionKernel::flash;
      else
        bad_term(field, spec, term, "unknown attention kernel (exact, flash)");
    } else if (term.substr(0, 4) == "gdn=") {
      const std::string_view k = term.substr(4);
      if (gdn_set) bad_term(field, spec, term, "gdn= given twice");
      gdn_set = true;
      if (k == "fla")
        v.gdn_fla = true;
      else if (k != "f32")
        bad_term(field, spec, term, "unknown GDN prefill (f32, fla)");
    } else if (term.substr(0, 6) == "round:") {
      const std::string_view body = term.substr(6);
      const std::size_t eq = body.rfind('=');
      if (eq == std::string_view::npos) bad_term(field, spec, term, "missing =BITS");
      std::string_view name = body.substr(0, eq);
      TensorRounding r;
      if (!parse_int(body.substr(eq + 1), r.bits) || r.bits < 0 || r.bits > 23)
        bad_term(field, spec, term, "BITS must be an integer 0…23 (f32 has 23 mantissa bits)");
      if (const std::size_t at = name.find('@'); at != std::string_view::npos) {
        if (!parse_int(name.substr(at + 1), r.layer) || r.layer < 0)
          bad_term(field, spec, term, "LAYER after '@' must be an integer ≥ 0");
        name = name.substr(0, at);
      }
      if (!valid_tensor_name(name))
        bad_term(field, spec, term, "NAME must be a hook name such as attn.out, mlp.out, hidden, gdn.state");
      r.name = std::string(name);
      for (const auto& o : v.round)
        if (o.name == r.name && o.layer == r.layer)
          bad_term(field, spec, term, "this tensor is rounded twice");
      v.round.push_back(std::move(r));
    } else {
      bad_term(field, spec, term, "unknown term");
    }
    if (e == std::string_view::npos) break;
    b = e + 1;
  }
  if (f32_base && v.bf16_base) fail("{}: '{}': f32 and bf16 are both bases; give one", field, spec);
  // Canonical order of the round terms (the hook applies them in this order).
  std::sort(v.round.begin(), v.round.end(),
            [](const TensorRounding& a, const TensorRounding& b) { return round_term(a) < round_term(b); });
  return v;
}

std::string to_string(const Variant& v) {
  std::vector<std::string> t = terms_of(v);
  if (t.empty()) return "f32";
  std::string s;
  for (const auto& x : t) s += (s.empty() ? "" : "+") + x;
  return s;
}

void round_attention_p(std::string_view p, float* x, std::size_t n) {
  if (p == "f32") return;
  if (p == "bf16") return quantize_inplace(DType::bfloat16, x, n);
  if (p == "f16") return quantize_inplace(DType::float16, x, n);
  if (p == "fp8") return quantize_inplace(DType::float8_e4m3fn, x, n);
  float s = 0;
  if (p == "fp8x448") s = 448.0f;
  if (p == "fp8x256") s = 256.0f;
  KC_ASSERT(s != 0, "round_attention_p: unknown P precision '{}'", p);
  // e4m3(f32(p·s)) / s, as the seed; p ∈ [0, 1], so p·s ≤ 448 never overflows e4m3.
  for (std::size_t i = 0; i < n; ++i) x[i] *= s;
  quantize_inplace(DType::float8_e4m3fn, x, n);
  for (std::size_t i = 0; i < n; ++i) x[i] /= s;
}

VariantUsage::VariantUsage(const Variant& v)
    : round_(v.round), matched_(new std::atomic<bool>[v.round.size()]) {
  for (std::size_t i = 0; i < round_.size(); ++i) matched_[i] = false;
}

void VariantUsage::saw(std::string_view name, int layer) {
  any_.store(true, std::memory_order_relaxed);
  for (std::size_t i = 0; i < round_.size(); ++i)
    if (round_[i].name == name && (round_[i].layer < 0 || round_[i].layer == layer))
      matched_[i].store(true, std::memory_order_relaxed);
  if (name == "attn.p") {
    saw_p_.store(true, std::memory_order_relaxed);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (names_.find(name) == names_.end()) names_.emplace(name);
}

void VariantUsage::check(std::string_view field) const {
  if (!any_.load()) return;
  for (std::size_t i = 0; i < round_.size(); ++i) {
    if (matched_[i].load()) continue;
    std::string names;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::set<std::string, std::less<>> all = names_;
      if (saw_p_.load()) all.insert("attn.p");
      for (const auto& n : all) names += (names.empty() ? "" : ", ") + n;
    }
    const auto& r = round_[i];
    fail("{}: {}: expected a tensor the model reports{}, got no tensor '{}'{}; its tensors: {}", field,
         round_term(r), r.layer >= 0 ? " at that layer" : "", r.name,
         r.layer >= 0 ? fmt::format(" at layer {}", r.layer) : "", names);
  }
}

std::shared_ptr<VariantUsage> apply_variant(CausalLM& model, const Variant& v, engine::TensorHook inner) {
  const std::string canon = to_string(v);
  for (const auto& r : v.round)
    if (r.layer >= 0 && static_cast<std::size_t>(r.layer) >= model.n_layers())
      fail("variant '{}': {}: expected a layer < {} (the model's layers), got {}", canon, round_term(r),
           model.n_layers(), r.layer);
  if (v.bf16_base)
    model.for_each_weight([](const std::string&, std::span<float> w) {
      for_chunks(w.data(), w.size(), true,
                 [](float* x, std::size_t n) { quantize_inplace(DType::bfloat16, x, n); });
    });
  engine::KernelOptions ko;
  ko.attention = v.attention;
  ko.gdn_fla_casts = v.gdn_fla;
  model.set_kernel_options(ko);
  auto usage = std::make_shared<VariantUsage>(v);
  if (v.is_reference() && v.round.empty() && !inner) {
    model.set_hook(nullptr);  // the reference: no hook at all (fastest, bitwise the plain engine)
    return usage;
  }
  const bool bf16 = v.bf16_base;
  const std::optional<DType> kv = v.kv && *v.kv != DType::float32 ? v.kv : std::nullopt;
  const std::string p = v.p.value_or("f32");
  std::vector<TensorRounding> round = v.round;
  model.set_hook([=](const engine::TensorEvent& ev) {
    float* x = ev.data.data();
    const std::size_t n = ev.data.size();
    const bool is_p = ev.name == "attn.p";  // from worker threads: no parallel_for inside
    usage->saw(ev.name, ev.layer);
    if (bf16 && bf16_activation(ev.name))
      for_chunks(x, n, !is_p, [](float* y, std::size_t m) { quantize_inplace(DType::bfloat16, y, m); });
    if (kv && (ev.name == "attn.k" || ev.name == "attn.v"))
      for_chunks(x, n, true,
                 [&](float* y, std::size_t m) { quantize_inplace(*kv, y, m, Saturation::clamp); });
    if (is_p && p != "f32") round_attention_p(p, x, n);
    for (const auto& r : round)
      if (r.name == ev.name && (r.layer < 0 || r.layer == ev.layer))
        for_chunks(x, n, !is_p, [&](float* y, std::size_t m) { round_mantissa_inplace(y, m, r.bits); });
    if (inner) inner(ev);
  });
  return usage;
}

}  // namespace kc
