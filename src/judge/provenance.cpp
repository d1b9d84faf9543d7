// Floors that match (docs/judge.md): the parts of a run's provenance a floor must share with the candidate.
#include <fmt/format.h>

#include "core/error.h"
#include "judge/judge.h"
#include "judge/words.h"
#include "model/variant.h"

namespace kc {

namespace {

// What a floor must share with the candidate, from a variant string. Dtypes by their canonical names
// (bf16 and bfloat16 are one dtype), whether the variant parsed or was read term by term.
struct RunClass {
  bool bf16 = false;
  std::string kv = "float32", logits = "float32";
  std::string kv_term, logits_term;  // as written ("fp8"), for the advice
};

std::string canonical_dtype(const std::string& name) {
  auto d = parse_dtype(name);
  return d ? dtype_name(*d) : name;
}

RunClass run_class(const std::string& variant) {
  RunClass c;
  try {  // the lab's own variants: parse_variant validates and gives the base, the KV and logits dtypes
    Variant v = parse_variant(variant, "variant");
    c.bf16 = v.bf16_base;
    if (v.kv) c.kv = dtype_name(*v.kv);
    if (v.logits) c.logits = dtype_name(*v.logits);
  } catch (const Error&) {
  }
  // Terms as written (foreign engines, and terms this build's parser may not know).
  std::size_t at = 0;
  while (at <= variant.size()) {
    std::size_t e = variant.find('+', at);
    if (e == std::string::npos) e = variant.size();
    const std::string term = variant.substr(at, e - at);
    if (term == "bf16") c.bf16 = true;
    if (term.rfind("kv=", 0) == 0) c.kv_term = term.substr(3), c.kv = canonical_dtype(c.kv_term);
    if (term.rfind("logits=", 0) == 0)
      c.logits_term = term.substr(7), c.logits = canonical_dtype(c.logits_term);
    at = e + 1;
  }
  return c;
}

}  // namespace

FloorMismatch floor_provenance_mismatch(const Provenance& cand, const Provenance& floor) {
  using W = FloorMismatch::What;
  if (cand.engine.empty() || floor.engine.empty() || cand.engine == "logits" || floor.engine == "logits")
    return {};
  if (cand.engine != floor.engine) return {W::engine, cand.engine, floor.engine};
  const RunClass a = run_class(cand.variant), b = run_class(floor.variant);
  if (a.bf16 != b.bf16) return {W::base, a.bf16 ? "bf16" : "f32", b.bf16 ? "bf16" : "f32"};
  if (a.kv != b.kv)
    return {W::kv, a.kv_term.empty() ? a.kv : a.kv_term, b.kv_term.empty() ? b.kv : b.kv_term};
  if (a.logits != b.logits)
    return {W::logits, a.logits_term.empty() ? a.logits : a.logits_term,
            b.logits_term.empty() ? b.logits : b.logits_term};
  return {};
}

std::string check_floor_provenance(const std::string& file, const std::string& cand_path,
                                   const Provenance& cand, const std::string& noise_path,
                                   const Provenance& noise, bool allow) {
  const FloorMismatch m = floor_provenance_mismatch(cand, noise);
  if (!m) return "";
  if (!allow)
    throw_input_error(
        file, "variant",
        fmt::format("a noise run of the candidate's engine and precision ({}: variant \"{}\"; {})", cand_path,
                    cand.variant, words::floor_mismatch_advice(m)),
        fmt::format("{} (variant \"{}\")", words::floor_mismatch(m), noise.variant));
  return fmt::format("{}: {}", noise_path, words::floor_mismatch(m));
}

void set_floor_provenance(JudgeReport& r, const Provenance& cand, std::vector<Provenance> noise,
                          std::vector<std::string> mismatches) {
  r.candidate_made_by = cand;
  r.noise_made_by = std::move(noise);
  r.floor_mismatches = std::move(mismatches);
  for (auto it = r.floor_mismatches.rbegin(); it != r.floor_mismatches.rend(); ++it)
    r.notes.insert(r.notes.begin(), words::floor_mismatch_note(*it));
}

}  // namespace kc
