// libFuzzer target: a candidate with edited values. The input's bytes become the candidate's arrays (raw
// f32/i32 bits: NaN, ±inf, positive log-probs, ids out of range) for a fixed valid golden (n = 32, k = 4);
// the file is written with a valid checksum, so only the value checks stand between it and the judge.
// Checked: read_candidate accepts exactly the files whose values pass an independent check here
// (log-probs ≤ 1e-3 or NaN, top-k mass ≤ 1 + 1e-3, top1_id in [0, vocab) or a broken row), and an accepted
// one is judged without a crash, every position counted once (finite or non-finite), unless its token
// log-prob contradicts its logprobs_at_ref at the golden's token (then the judge refuses it, exactly then).
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "golden/golden.h"
#include "judge/judge.h"

namespace {
constexpr int kN = 32, kK = 4, kVocab = 64;

const kc::Golden& golden() {
  static kc::Golden g = [] {
    kc::GoldenBuffers b;
    b.k = kK;
    for (int i = 0; i < kN; ++i) {
      const double lp[kK] = {-0.5, -1.5, -2.5, -3.5};
      double tail = 1;
      for (int j = 0; j < kK; ++j) {
        b.top_ids.push_back((i + 5 * j) % kVocab);
        b.top_logprobs.push_back(static_cast<float>(lp[j] - 0.01 * (i % 3)));
        tail -= std::exp(static_cast<double>(b.top_logprobs.back()));
      }
      b.other_logprob.push_back(static_cast<float>(std::log(tail)));
      b.token.push_back(b.top_ids[i * kK + 1]);
      b.token_logprob.push_back(b.top_logprobs[i * kK + 1]);
      b.segment.push_back(0);
      b.depth.push_back(i + 1);
      b.phase.push_back(0);
      b.flags.push_back(0);
    }
    kc::GoldenMeta m;
    m.k = kK;
    m.vocab = kVocab;
    m.n = kN;
    m.segments = {kc::Segment{"all", "prose", kN, 0, "", {}}};
    const std::string path = "/tmp/fuzz_candidate_values_golden." + std::to_string(::getpid());
    kc::write_golden(path, m, b.view());
    kc::Golden r = kc::read_golden(path);
    ::unlink(path.c_str());
    return r;
  }();
  return g;
}

bool values_ok(const kc::CandidateBuffers& c) {
  auto lp_ok = [](float v) { return !(v > 1e-3f); };
  for (int i = 0; i < kN; ++i) {
    double mass = 0;
    for (int j = 0; j < kK; ++j) {
      const float v = c.logprobs_at_ref[i * kK + j];
      if (!lp_ok(v)) return false;
      mass += std::exp(static_cast<double>(v));
    }
    if (mass > 1.0 + 1e-3 * 1.01) return false;  // the reader sums in f32: a hair of slack either way
    if (!lp_ok(c.other_logprob[i]) || !lp_ok(c.top1_logprob[i]) || !lp_ok(c.token_logprob[i])) return false;
    const bool broken = c.flags[i] & kc::kFlagsBroken;
    if (c.top1_id[i] >= kVocab || (c.top1_id[i] < 0 && !broken)) return false;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const kc::Golden& g = golden();
  kc::CandidateBuffers c;
  c.k = kK;
  std::size_t at = 0;
  auto next32 = [&]() {
    std::uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= static_cast<std::uint32_t>(at < size ? data[at++] : 0) << (8 * b);
    return v;
  };
  auto f32 = [&]() {
    std::uint32_t v = next32();
    float f;
    std::memcpy(&f, &v, 4);
    return f;
  };
  for (int i = 0; i < kN; ++i) {
    float lp[kK];
    for (float& v : lp) v = f32();
    const float other = f32();
    const auto top1 = static_cast<std::int32_t>(next32());
    const float top1_lp = f32(), token_lp = f32();
    const auto flags = static_cast<std::uint8_t>(next32() & 0x1f);
    c.push({lp, kK}, other, top1, top1_lp, token_lp, flags);
  }
  kc::CandidateMeta m = kc::candidate_meta_for(g, {"fuzz", "", ""});
  const std::string path = "/tmp/fuzz_candidate_values." + std::to_string(::getpid());
  kc::write_candidate(path, m, c.view());
  bool accepted = true;
  kc::Candidate cand;
  try {
    cand = kc::read_candidate(path);
  } catch (const kc::Error&) {
    accepted = false;
  }
  ::unlink(path.c_str());
  const bool near_mass_edge = [&] {  // f32 vs f64 sums may disagree within rounding of 1 + 1e-3
    for (int i = 0; i < kN; ++i) {
      double mass = 0;
      for (int j = 0; j < kK; ++j) mass += std::exp(static_cast<double>(c.logprobs_at_ref[i * kK + j]));
      if (std::abs(mass - 1.001) < 1e-5) return true;
    }
    return false;
  }();
  if (accepted != values_ok(c) && !near_mass_edge) std::abort();
  if (!accepted) return 0;
  // The judge's token rule (the golden's token is its column 1 here): a known token log-prob of a clean row
  // must match logprobs_at_ref there up to 1e-3 · (1 + |x|).
  bool token_ok = true;
  for (int i = 0; i < kN; ++i) {
    if (c.flags[i] & (kc::kFlagsBroken | kc::kFlagTokenUnknown)) continue;
    const float tc = c.token_logprob[i], lq = c.logprobs_at_ref[i * kK + 1];
    if (std::fabs(tc - lq) > 1e-3f * (1 + std::fabs(lq))) token_ok = false;
  }
  kc::check_candidate_matches(g, cand);
  kc::CandidateInput ci;
  ci.path = path;
  ci.cand = cand;
  ci.n = cand.meta.n;
  kc::JudgeAccumulator acc;
  bool judged = true;
  try {
    acc = kc::accumulate(g, ci, nullptr);
  } catch (const kc::Error&) {
    judged = false;
  }
  if (judged != token_ok) std::abort();  // refused exactly when the token rule is broken
  if (!judged) return 0;
  try {
    kc::JudgeReport r = kc::judge(g.meta, "fuzz", acc, "fuzz", {}, {}, nullptr, kc::JudgeOptions{});
    if (r.cand.overall.n != kN) std::abort();
    (void)kc::render_text(r);
  } catch (const kc::Error&) {
  }
  return 0;
}
