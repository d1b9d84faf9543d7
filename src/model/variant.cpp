#include "model/variant.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "numeric/formats.h"

namespace kc {

namespace {

constexpr const char* kSyntax =
    "terms joined by '+': f32 | bf16 | p=f32|bf16|f16|fp8|fp8x448|fp8x256 | kv=DTYPE | attn=exact|flash | "
    "gdn=f32|fla | order=SEED (integer ≥ 0) | logits=f32|bf16|f16 | bug:NAME=STRENGTH | bug:deep_score@D=S | "
    "round:NAME[@LAYER]=BITS (BITS 0…23), e.g. bf16+p=fp8x448+round:mlp.out=5, bf16+order=3";

// The injected regressions of `bug:NAME=STRENGTH` (docs/lab.md, the zoo of bench/zoo.py). `bits`: STRENGTH
// is a mantissa width 0 … 22 (smaller = stronger); `count`: an integer ≥ 1 (smaller = stronger); `real`: a
// real number ≠ 0 (|larger| = stronger); `factor`: a real > 0, ≠ 1. `from`: the bug has a start depth
// (`bug:NAME@D=S`), this one when none is written (0: the bug has none).
enum class BugArg { bits, count, real, factor };
struct BugSpec {
  const char* name;
  BugArg arg;
  const char* what;
  std::int64_t from = 0;
};
constexpr BugSpec kBugs[] = {
    {"attn_scale", BugArg::real, "attention: softmax scale times 1 + S (hook: attn.q scaled)"},
    {"deep_score", BugArg::real,
     "depth only: attention scores of keys at positions ≥ D times 1 + S (bug:deep_score@D=S; default D = 256, "
     "a tile boundary)",
     static_cast<std::int64_t>(engine::kDeepKeys)},
    {"kv_k", BugArg::bits, "KV cache: K kept to S mantissa bits as it enters the cache (V untouched)"},
    {"kv_v", BugArg::bits, "KV cache: V kept to S mantissa bits as it enters the cache (K untouched)"},
    {"decode_kv", BugArg::bits,
     "decode only: K and V rows written by single-token steps kept to S mantissa bits"},
    {"rope", BugArg::bits, "RoPE: angle pos·inv_freq kept to S mantissa bits (wrong at large positions)"},
    {"norm_rsqrt", BugArg::bits, "RMSNorm: 1/sqrt(var + eps) kept to S mantissa bits (rsqrt, no Newton step)"},
    {"norm_eps", BugArg::factor, "RMSNorm: eps times S (a wrong eps)"},
    {"gemm_acc", BugArg::count,
     "GEMM accumulation (Llama's packed GEMM): partial sums stored as bf16 every S k"},
    {"silu", BugArg::bits, "activation: SiLU's sigmoid kept to S mantissa bits (an approximate SiLU)"},
    {"logits_scale", BugArg::real, "logits: times 1 + S (a temperature bug)"},
};

const BugSpec* find_bug(std::string_view name) {
  for (const auto& b : kBugs)
    if (name == b.name) return &b;
  return nullptr;
}

std::string bug_names() {
  std::string s;
  for (const auto& b : kBugs) s += (s.empty() ? "" : ", ") + std::string(b.name);
  return s;
}

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
  if (v.order != 0) t.push_back(fmt::format("order={}", v.order));
  if (v.logits && *v.logits != DType::float32) t.push_back("logits=" + kv_name(*v.logits));
  for (const auto& b : v.bugs)
    t.push_back(b.from >= 0 ? fmt::format("bug:{}@{}={}", b.name, b.from, b.strength)
                            : fmt::format("bug:{}={}", b.name, b.strength));
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
  if (order != 0 || !bugs.empty() || (logits && *logits != DType::float32)) return false;
  if (p && *p != "f32") return false;
  if (kv && *kv != DType::float32) return false;
  for (const auto& r : round)
    if (r.bits < 23) return false;
  return true;
}

Variant parse_variant(std::string_view spec, std::string_view field) {
  Variant v;
  if (spec.empty()) return v;
  bool f32_base = false, attn_set = false, gdn_set = false, order_set = false;
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
    } else if (term.substr(0, 6) == "order=") {
      if (order_set) bad_term(field, spec, term, "order= given twice");
      order_set = true;
      const std::string_view d = term.substr(6);
      auto [ptr, ec] = std::from_chars(d.data(), d.data() + d.size(), v.order);
      if (d.empty() || ec != std::errc() || ptr != d.data() + d.size())
        bad_term(field, spec, term, "SEED must be an integer 0 … 4294967295 (0 = the default order)");
    } else if (term.substr(0, 7) == "logits=") {
      const std::string_view d = term.substr(7);
      if (v.logits) bad_term(field, spec, term, "logits= given twice");
      if (d == "f32")
        v.logits = DType::float32;
      else if (d == "bf16")
        v.logits = DType::bfloat16;
      else if (d == "f16")
        v.logits = DType::float16;
      else
        bad_term(field, spec, term, "unknown logits dtype (f32, bf16, f16)");
    } else if (term.substr(0, 4) == "bug:") {
      const std::string_view body = term.substr(4);
      const std::size_t eq = body.find('=');
      if (eq == std::string_view::npos) bad_term(field, spec, term, "missing =STRENGTH");
      std::string_view name = body.substr(0, eq);
      const std::string_view val = body.substr(eq + 1);
      std::int64_t from = -1;  // -1: the bug's default start (dropped from the canonical form)
      if (const std::size_t at = name.find('@'); at != std::string_view::npos) {
        const std::string_view d = name.substr(at + 1);
        auto [ptr, ec] = std::from_chars(d.data(), d.data() + d.size(), from);
        if (d.empty() || ec != std::errc() || ptr != d.data() + d.size() || from < 1 || from > (1ll << 31))
          bad_term(field, spec, term, "the start depth D after '@' must be an integer 1 … 2147483648");
        name = name.substr(0, at);
      }
      const BugSpec* b = find_bug(name);
      if (!b) bad_term(field, spec, term, fmt::format("unknown bug '{}' (one of {})", name, bug_names()));
      if (from >= 0 && b->from == 0)
        bad_term(field, spec, term, "this bug has no start depth ('@D' is for deep_score)");
      if (from == b->from) from = -1;
      for (const auto& o : v.bugs)
        if (o.name == name) bad_term(field, spec, term, "this bug is given twice");
      double x = 0;
      auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), x);
      const bool number = !val.empty() && ec == std::errc() && ptr == val.data() + val.size() && std::isfinite(x);
      switch (b->arg) {
        case BugArg::bits:
          if (!number || x != std::floor(x) || x < 0 || x > 22)
            bad_term(field, spec, term, "STRENGTH must be a mantissa width, an integer 0 … 22");
          break;
        case BugArg::count:
          if (!number || x != std::floor(x) || x < 1 || x > 1e9)
            bad_term(field, spec, term, "STRENGTH must be an integer ≥ 1 (a k interval)");
          break;
        case BugArg::real:
          if (!number || x == 0) bad_term(field, spec, term, "STRENGTH must be a real number ≠ 0");
          break;
        case BugArg::factor:
          if (!number || x <= 0 || x == 1) bad_term(field, spec, term, "STRENGTH must be a real factor > 0, ≠ 1");
          break;
      }
      v.bugs.push_back({std::string(name), x, from});
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
  if (f32_base && v.bf16_base) fail("{}: '{}': expected one base (f32 or bf16), got both", field, spec);
  std::sort(v.bugs.begin(), v.bugs.end(),
            [](const InjectedBug& a, const InjectedBug& b) { return a.name < b.name; });
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
  // e4m3(f32(p·s)) / s, as the founding study does; p ∈ [0, 1], so p·s ≤ 448 never overflows e4m3.
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
  ko.order = v.order;
  // Bugs that live in the engine's kernels go into its options; the rest into the hook below.
  float attn_scale = 0, logits_scale = 0;
  int kv_k = 23, kv_v = 23, decode_kv = 23;
  for (const auto& b : v.bugs) {
    const auto bits = static_cast<int>(b.strength);
    if (b.name == "attn_scale") attn_scale = static_cast<float>(b.strength);
    if (b.name == "deep_score") {
      ko.bugs.deep_score = static_cast<float>(b.strength);
      if (b.from >= 0) ko.bugs.deep_from = static_cast<std::size_t>(b.from);
    }
    if (b.name == "kv_k") kv_k = bits;
    if (b.name == "kv_v") kv_v = bits;
    if (b.name == "decode_kv") decode_kv = bits;
    if (b.name == "rope") ko.bugs.rope_angle_bits = bits;
    if (b.name == "norm_rsqrt") ko.bugs.norm_rsqrt_bits = bits;
    if (b.name == "norm_eps") ko.bugs.norm_eps_factor = static_cast<float>(b.strength);
    if (b.name == "gemm_acc") ko.bugs.gemm_bf16_every = static_cast<std::size_t>(b.strength);
    if (b.name == "silu") ko.bugs.silu_sigmoid_bits = bits;
    if (b.name == "logits_scale") logits_scale = static_cast<float>(b.strength);
  }
  model.set_kernel_options(ko);
  auto usage = std::make_shared<VariantUsage>(v);
  const bool hook_bugs = attn_scale != 0 || logits_scale != 0 || kv_k < 23 || kv_v < 23 || decode_kv < 23;
  const std::optional<DType> logits_dt =
      v.logits && *v.logits != DType::float32 ? v.logits : std::nullopt;
  if (!v.bf16_base && !v.gdn_fla && v.attention == engine::AttentionKernel::exact && !(v.p && *v.p != "f32") &&
      !(v.kv && *v.kv != DType::float32) && v.round.empty() && !hook_bugs && !logits_dt && !inner) {
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
    if (hook_bugs && !is_p) {
      if (attn_scale != 0 && ev.name == "attn.q")  // q·(1+S) is the score scale times 1+S
        for (std::size_t i = 0; i < n; ++i) x[i] *= 1.0f + attn_scale;
      if (logits_scale != 0 && ev.name == "logits")
        for (std::size_t i = 0; i < n; ++i) x[i] *= 1.0f + logits_scale;
      if (kv_k < 23 && ev.name == "attn.k") round_mantissa_inplace(x, n, kv_k);
      if (kv_v < 23 && ev.name == "attn.v") round_mantissa_inplace(x, n, kv_v);
      if (decode_kv < 23 && ev.rows == 1 && (ev.name == "attn.k" || ev.name == "attn.v"))
        round_mantissa_inplace(x, n, decode_kv);
    }
    if (logits_dt && ev.name == "logits")
      for_chunks(x, n, true, [&](float* y, std::size_t m) { quantize_inplace(*logits_dt, y, m); });
    if (inner) inner(ev);
  });
  return usage;
}

}  // namespace kc
