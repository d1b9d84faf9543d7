// Matching an engine dump (vLLM, SGLang) to a golden: see importers.h.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "golden/importers.h"

namespace kc {

namespace {

std::string describe_position(const Golden& g, std::int64_t n) {
  std::int32_t s = g.a.segment[n];
  const std::string& name =
      s >= 0 && static_cast<std::size_t>(s) < g.meta.segments.size() ? g.meta.segments[s].name : "?";
  return fmt::format("golden position {} (segment {} \"{}\", depth {})", n, s, name, g.a.depth[n]);
}

}  // namespace

CandidateBuffers candidate_from_engine(const Golden& g, const EngineDump& d, ImportStats* stats) {
  const std::int64_t N = g.meta.n;
  const int k = g.meta.k;
  if (d.sequences.size() != g.meta.segments.size())
    throw_input_error(d.path, "requests",
                      fmt::format("{} requests, one per segment of the golden {} (in its order)",
                                  g.meta.segments.size(), g.path),
                      std::to_string(d.sequences.size()));
  CandidateBuffers out;
  out.k = k;
  ImportStats st;
  std::vector<float> lq(k);
  std::vector<std::uint8_t> cov(k);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float log_half = std::log(0.5f);
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int32_t s = g.a.segment[n], depth = g.a.depth[n], tok = g.a.token[n];
    const EngineSequence& q = d.sequences[s];
    const std::int64_t i = static_cast<std::int64_t>(depth) - q.first_token;
    if (i < 0 || i >= static_cast<std::int64_t>(q.size()))
      throw_input_error(d.path, q.where,
                        fmt::format("prompt token {} for {} (the request holds prompt tokens [{}, {}))",
                                    depth, describe_position(g, n), q.first_token, q.first_token + q.size()),
                        "none");
    if (q.tokens_known && q.tokens[i] != tok)
      throw_input_error(d.path, fmt::format("{}: prompt token {}", q.where, depth),
                        fmt::format("token {} as in the golden at {} (first difference: the engine was given "
                                    "other text or another tokenisation)",
                                    tok, describe_position(g, n)),
                        std::to_string(q.tokens[i]));
    if (!q.has_row[i])
      throw_input_error(
          d.path, fmt::format("{}: prompt token {}", q.where, depth),
          fmt::format("a reported distribution for {} (engines report none for a request's first "
                      "token or before logprob_start_len)",
                      describe_position(g, n)),
          "null");
    const auto b = q.row_begin[i], e = q.row_begin[i + 1];
    // Own top-1: the best listed id (the true top-1 is listed whenever the engine gave its top-K').
    std::int32_t top1 = -1;
    float top1_lp = -std::numeric_limits<float>::infinity();
    std::uint8_t flags = 0;
    for (auto j = b; j < e; ++j) {
      float v = q.log_probs[j];
      if (std::isnan(v)) {
        flags |= kFlagNaN;
        continue;
      }
      if (v > top1_lp || (v == top1_lp && q.ids[j] < top1)) top1_lp = v, top1 = q.ids[j];
    }
    const float bound = q.bound[i];
    if (top1 < 0 || (bound >= 0.0f && top1_lp <= log_half))
      throw_input_error(
          d.path, fmt::format("{}: prompt token {}", q.where, depth),
          "the engine's own top-K' log-probs (vLLM prompt_logprobs ≥ 1, SGLang top_logprobs_num ≥ 1; "
          "20 recommended): without them its top-1 is unknown",
          fmt::format("{} listed ids", e - b));
    if (!q.tokens_known) {
      float unused;
      if (!q.find(i, tok, unused))
        throw_input_error(
            d.path, fmt::format("{}: prompt token {}", q.where, depth),
            fmt::format("an entry for the golden's corpus token {} at {} (without prompt_token_ids "
                        "the token can only be checked this way)",
                        tok, describe_position(g, n)),
            "none");
    }
    int n_cov = 0;
    for (int j = 0; j < k; ++j) {
      float v;
      if (q.find(i, g.a.top_ids[n * k + j], v)) {
        lq[j] = v;
        cov[j] = 1;
        ++n_cov;
      } else {
        lq[j] = bound;  // unlisted: log q ≤ bound
        cov[j] = 0;
      }
    }
    float tok_lp;
    if (!q.find(i, tok, tok_lp)) tok_lp = nan, flags |= kFlagTokenUnknown;
    if (std::isnan(tok_lp)) flags |= kFlagTokenUnknown;
    out.push(lq, nan, top1, top1_lp, tok_lp, flags, n_cov == k ? nullptr : cov.data());
    st.positions += 1;
    st.ids += k;
    st.ids_covered += n_cov;
    st.positions_fully_covered += n_cov == k;
    st.token_unknown += (flags & kFlagTokenUnknown) != 0;
    st.non_finite += (flags & kFlagNaN) != 0;
    std::int64_t listed = static_cast<std::int64_t>(e - b);
    st.min_reported = st.min_reported < 0 ? listed : std::min(st.min_reported, listed);
  }
  if (stats) *stats = st;
  return out;
}

}  // namespace kc
