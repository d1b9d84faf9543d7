#include "golden/record_topk.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "io/safetensors.h"

namespace kc {

namespace {

template <class T>
void check_size(std::span<const T> s, std::size_t n, const std::string& out, const char* field) {
  if (s.size() != n)
    throw_input_error(out, field, fmt::format("{} values", n), std::to_string(s.size()));
}

}  // namespace

std::string write_golden_from_topk(const std::string& out, const Corpus& c, const TopkGoldenRows& r,
                                   std::int64_t vocab, const std::string& model_identity,
                                   const Provenance& made_by) {
  const std::int64_t n = c.positions();
  const int k = r.k;
  if (k < 2 || k > vocab || k > 4096) fail("{}: k: expected 2 ≤ k ≤ min(vocab = {}, 4096), got {}", out, vocab, k);
  if (c.vocab > vocab)
    throw_input_error(out, "vocab", fmt::format("≥ {} (the corpus tokenizer's)", c.vocab), std::to_string(vocab));
  const auto N = static_cast<std::size_t>(n), K = static_cast<std::size_t>(k);
  check_size(r.top_ids, N * K, out, "top_ids");
  check_size(r.top_logprobs, N * K, out, "top_logprobs");
  check_size(r.other_logprob, N, out, "other_logprob");
  check_size(r.token_logprob, N, out, "token_logprob");
  check_size(r.flags, N, out, "flags");

  GoldenBuffers g;
  g.k = k;
  g.top_ids.resize(N * K);
  g.top_logprobs.resize(N * K);
  g.other_logprob.assign(r.other_logprob.begin(), r.other_logprob.end());
  g.token_logprob.assign(r.token_logprob.begin(), r.token_logprob.end());
  g.flags.assign(r.flags.begin(), r.flags.end());
  std::vector<Segment> segs;
  std::vector<std::int32_t> first_tokens;
  std::int64_t start = 0;
  for (std::size_t s = 0; s < c.segments.size(); ++s) {
    const CorpusSegment& cs = c.segments[s];
    auto w = c.window(cs);
    first_tokens.push_back(w[0]);
    segs.push_back(Segment{cs.name, cs.domain, cs.depth, start, cs.text, cs.offsets});
    for (std::int64_t p = 0; p < cs.depth; ++p) {
      g.token.push_back(w[p + 1]);
      g.segment.push_back(static_cast<std::int32_t>(s));
      g.depth.push_back(static_cast<std::int32_t>(p + 1));
      g.phase.push_back(p >= cs.depth - cs.decode_last ? 1 : 0);
    }
    start += cs.depth;
  }
  std::vector<std::size_t> order(K);
  for (std::size_t i = 0; i < N; ++i) {
    if (r.flags[i] & kFlagsBroken)
      fail("{}: row {}: expected finite reference logits (a golden must be clean), got flags {}", out, i,
           r.flags[i]);
    const std::int32_t* ids = &r.top_ids[i * K];
    const float* lp = &r.top_logprobs[i * K];
    for (std::size_t j = 0; j < K; ++j) {
      if (ids[j] < 0 || ids[j] >= vocab)
        throw_input_error(out, fmt::format("top_ids[{}, {}]", i, j), fmt::format("an id in [0, {})", vocab),
                          std::to_string(ids[j]));
      if (!std::isfinite(lp[j]) || lp[j] > 0)
        throw_input_error(out, fmt::format("top_logprobs[{}, {}]", i, j), "a finite log-prob ≤ 0",
                          fmt::format("{}", lp[j]));
    }
    if (!(r.other_logprob[i] <= 0) || !(r.token_logprob[i] <= 0))  // −inf allowed, NaN not
      throw_input_error(out, fmt::format("other/token_logprob[{}]", i), "log-probs ≤ 0",
                        fmt::format("{}, {}", r.other_logprob[i], r.token_logprob[i]));
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return lp[a] != lp[b] ? lp[a] > lp[b] : ids[a] < ids[b];
    });
    for (std::size_t j = 0; j < K; ++j) {
      g.top_ids[i * K + j] = ids[order[j]];
      g.top_logprobs[i * K + j] = lp[order[j]];
      if (j > 0 && g.top_ids[i * K + j] == g.top_ids[i * K + j - 1])
        throw_input_error(out, fmt::format("top_ids[{}]", i), "distinct ids", "a repeated id");
    }
    // Repeated ids need not be adjacent after sorting by value: check the row as a set too.
    std::vector<std::int32_t> sorted(&g.top_ids[i * K], &g.top_ids[i * K] + K);
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw_input_error(out, fmt::format("top_ids[{}]", i), "distinct ids", "a repeated id");
  }

  GoldenMeta m;
  m.k = k;
  m.vocab = vocab;
  m.n = n;
  m.identity = {model_identity, c.tokenizer_id, c.identity()};
  m.made_by = made_by;
  m.segments = segs;
  m.extra[kCorpusFirstTokensKey] = nlohmann::json(first_tokens).dump();  // covered by the checksum
  return write_golden(out, m, g.view());
}

std::vector<std::int32_t> corpus_first_tokens(const Golden& g) {
  std::vector<std::int32_t> first;
  auto it = g.meta.extra.find(kCorpusFirstTokensKey);
  if (it == g.meta.extra.end())
    throw_input_error(g.path, std::string("metadata ") + kCorpusFirstTokensKey,
                      "the segments' first tokens (a golden recorded over a corpus)", "nothing");
  try {
    first = nlohmann::json::parse(it->second).get<std::vector<std::int32_t>>();
  } catch (const nlohmann::json::exception&) {
    throw_input_error(g.path, std::string("metadata ") + kCorpusFirstTokensKey, "a JSON list of ids", "other");
  }
  if (first.size() != g.meta.segments.size())
    throw_input_error(g.path, std::string("metadata ") + kCorpusFirstTokensKey,
                      fmt::format("{} ids (one per segment)", g.meta.segments.size()), std::to_string(first.size()));
  return first;
}

std::vector<GoldenWindow> golden_windows(const Golden& g) {
  const std::vector<std::int32_t> first = corpus_first_tokens(g);
  const auto& segs = g.meta.segments;
  std::vector<GoldenWindow> out;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    GoldenWindow w;
    w.start = segs[i].start;
    std::int64_t e = i + 1 < segs.size() ? segs[i + 1].start : g.meta.n;
    w.depth = e - w.start;
    if (first[i] < 0 || first[i] >= g.meta.vocab)
      throw_input_error(g.path, kCorpusFirstTokensKey, fmt::format("ids in [0, {})", g.meta.vocab),
                        std::to_string(first[i]));
    w.tokens.push_back(first[i]);
    for (std::int64_t p = w.start; p < e; ++p) {
      w.tokens.push_back(g.a.token[p]);
      if (g.a.segment[p] != static_cast<std::int32_t>(i) || g.a.depth[p] != p - w.start + 1)
        throw_input_error(g.path, fmt::format("segment/depth[{}]", p),
                          fmt::format("segment {}, depth {} (a golden recorded over a corpus)", i, p - w.start + 1),
                          fmt::format("{}, {}", g.a.segment[p], g.a.depth[p]));
      if (g.a.phase[p] == 0) ++w.n_prefill;
    }
    out.push_back(std::move(w));
  }
  return out;
}

std::string write_candidate_from_topk(const std::string& out, const Golden& g, const TopkCandidateRows& r,
                                      const Provenance& made_by) {
  const auto N = static_cast<std::size_t>(g.meta.n), K = static_cast<std::size_t>(g.meta.k);
  check_size(r.logprobs_at_ref, N * K, out, "logprobs_at_ref");
  check_size(r.other_logprob, N, out, "other_logprob");
  check_size(r.top1_id, N, out, "top1_id");
  check_size(r.top1_logprob, N, out, "top1_logprob");
  check_size(r.token_logprob, N, out, "token_logprob");
  check_size(r.flags, N, out, "flags");
  CandidateBuffers c;
  c.k = g.meta.k;
  for (std::size_t i = 0; i < N; ++i) {
    std::span<const float> lp = r.logprobs_at_ref.subspan(i * K, K);
    std::int32_t top1 = r.top1_id[i];
    if (r.flags[i] & kFlagsBroken) {  // as record_logits: the row stays visible as non-finite
      std::vector<float> nan(K, NAN);
      c.push(nan, NAN, top1 >= 0 && top1 < g.meta.vocab ? top1 : 0, NAN, NAN, r.flags[i]);
      continue;
    }
    if (top1 < 0 || top1 >= g.meta.vocab)
      throw_input_error(out, fmt::format("top1_id[{}]", i), fmt::format("an id in [0, {})", g.meta.vocab),
                        std::to_string(top1));
    c.push(lp, r.other_logprob[i], top1, r.top1_logprob[i], r.token_logprob[i], r.flags[i]);
  }
  CandidateMeta m = candidate_meta_for(g, made_by);
  return write_candidate(out, m, c.view());
}

}  // namespace kc
