// Precision variants of the reference engine (the lab, docs/lab.md): named, composable changes to how the f32
// engine rounds, applied to any CausalLM through its hook, its weights and its kernel options.
//
// A variant is written as terms joined by '+' (docs/lab.md), in any order; the canonical form sorts them:
//   f32                 the reference (no term changes anything; the empty string means the same)
//   bf16                production-like base: weights rounded to bf16 once, activations rounded to bf16 at
//                       every op boundary (every named tensor except attn.p, logits and recurrent state
//                       "gdn.*state*", which production keeps in f32), f32 accumulation
//   p=DTYPE             attention P rounded before P·V, row sum from the unrounded p (the founding study's attention_row):
//                       f32 | bf16 | f16 | fp8 (e4m3 direct) | fp8x448 | fp8x256 (f32(p·s) → e4m3 → /s)
//   kv=DTYPE            KV cache stored as DTYPE (attn.k / attn.v rounded as they enter the cache):
//                       f32 | bf16 | f16 | fp8 (e4m3fn, saturating) | any float dtype name of numeric/dtype.h
//   attn=exact|flash    attention kernel of equal precision, other summation order (engine::AttentionKernel)
//   gdn=f32|fla         Gated DeltaNet chunked prefill all-f32 (transformers) or with FLA's bf16 casts
//                       (engine::KernelOptions::gdn_fla_casts; no effect on models without GDN layers)
//   round:NAME=BITS     tensor NAME kept to BITS mantissa bits (round_mantissa, RNE, exponent unchanged);
//                       NAME is a hook name ("attn.out", "gdn.state"), optionally one layer: "attn.out@3"
//   order=SEED          another summation order of equal precision (engine::KernelOptions::order): GEMM K
//                       blocks, attention key blocks, RMSNorm reductions in SEED's drawn order; SEED ≥ 0,
//                       0 = the default order. An equally correct implementation: a noise-floor run
//   logits=DTYPE        logits rounded to DTYPE (f32 | bf16 | f16) before the log-softmax, as an engine
//                       that returns bf16 logits (vLLM in bf16)
//   bug:NAME=STRENGTH   an injected regression (kBugs in variant.cpp, docs/lab.md): attn_scale, deep_score,
//                       kv_k, kv_v, decode_kv, rope, norm_rsqrt, norm_eps, gemm_acc, silu, logits_scale
//   bug:deep_score@D=S  the depth bug from key position D on (default 256, dropped from the canonical form)
// Example: "bf16+p=fp8x448+round:mlp.out=5".
// The canonical form drops terms that equal the default (f32 with other terms, p=f32, kv=f32,
// attn=exact) and keeps round terms as written (round:X=23 is a sweep's end point).
//
// Hook order per event: bf16 activation rounding, then kv (attn.k/v), then p (attn.p), then the round:
// terms in canonical order, then the hook's bug: terms, then logits=, then `inner`.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "model/causal_lm.h"
#include "numeric/dtype.h"

namespace kc {

struct TensorRounding {
  std::string name;  // hook name
  int layer = -1;    // -1: every layer
  int bits = 23;     // mantissa bits kept, 0 … 23
};

struct InjectedBug {
  std::string name;  // a name of kBugs (variant.cpp)
  double strength = 0;
  std::int64_t from = -1;  // bug:NAME@D=S: the depth where it starts (deep_score); -1 = the bug's default
};

struct Variant {
  bool bf16_base = false;
  std::optional<std::string> p;  // "f32" "bf16" "f16" "fp8" "fp8x448" "fp8x256"
  std::optional<DType> kv;       // KV cache dtype
  engine::AttentionKernel attention = engine::AttentionKernel::exact;
  bool gdn_fla = false;  // gdn=fla: FLA-style bf16 casts in the Gated DeltaNet chunked prefill
  std::vector<TensorRounding> round;
  std::uint32_t order = 0;        // order=SEED
  std::optional<DType> logits;    // logits=DTYPE
  std::vector<InjectedBug> bugs;  // bug:NAME=STRENGTH, sorted by name
  bool is_reference() const;  // no term changes the f32 engine's bits
};

// Throws kc::Error naming `field` (e.g. "--variant") and the expected syntax on a bad term.
Variant parse_variant(std::string_view spec, std::string_view field = "--variant");
std::string to_string(const Variant& v);  // canonical: "f32" for the reference

// Rounds x[0 … n) as the term p=`p` does ("f32" … "fp8x256"): the scalar loop the hook runs on attn.p.
void round_attention_p(std::string_view p, float* x, std::size_t n);

// What an installed variant's hook saw: a round: term that never met its tensor is a typo or a tensor the
// model does not have, and would silently change nothing. Thread-safe.
class VariantUsage {
 public:
  explicit VariantUsage(const Variant& v);
  void saw(std::string_view name, int layer);  // called by the hook for every event
  // Throws kc::Error ("FIELD: round:NAME: the model reported no tensor NAME …, it has: …") if some round:
  // term matched nothing although the hook saw events; does nothing before the first event.
  void check(std::string_view field = "--variant") const;

 private:
  std::vector<TensorRounding> round_;
  std::unique_ptr<std::atomic<bool>[]> matched_;
  mutable std::mutex mu_;
  std::set<std::string, std::less<>> names_;     // every name seen but attn.p (under mu_)
  std::atomic<bool> any_{false}, saw_p_{false};  // attn.p comes from worker threads: no lock for it
};

// Rounds the weights (bf16 base), sets the kernel options and installs the rounding hook. `inner`, if set,
// is called after the variant's rounding for every event (trace uses it to capture tensors); it must be
// thread-safe for "attn.p" like any hook. A round: term's layer beyond the model's layers is an error.
// Rounding weights is permanent: apply a variant to a freshly loaded model (apply_variant(f32) on a model
// that had bf16 applied does not restore its weights).
std::shared_ptr<VariantUsage> apply_variant(CausalLM& model, const Variant& v,
                                            engine::TensorHook inner = nullptr);

}  // namespace kc
