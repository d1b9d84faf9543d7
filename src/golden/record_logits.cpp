#include "golden/record_logits.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/parallel.h"
#include "numeric/fastmath.h"
#include "numeric/formats.h"

namespace kc {

void Logits::row(std::int64_t i, float* out) const {
  const std::size_t v = static_cast<std::size_t>(vocab);
  const std::uint8_t* p = t.bytes.data();
  switch (t.dtype) {
    case DType::float32:
      std::memcpy(out, p + static_cast<std::size_t>(i) * v * 4, v * 4);
      break;
    case DType::bfloat16: {
      const std::uint8_t* r = p + static_cast<std::size_t>(i) * v * 2;
      for (std::size_t j = 0; j < v; ++j) {
        std::uint32_t bits =
            (static_cast<std::uint32_t>(r[2 * j + 1]) << 24) | (static_cast<std::uint32_t>(r[2 * j]) << 16);
        std::memcpy(&out[j], &bits, 4);
      }
      break;
    }
    case DType::float16: {
      const std::uint8_t* r = p + static_cast<std::size_t>(i) * v * 2;
      for (std::size_t j = 0; j < v; ++j)
        out[j] = f16_to_f32(static_cast<std::uint16_t>(r[2 * j] | (r[2 * j + 1] << 8)));
      break;
    }
    default:
      KC_ASSERT(false, "Logits::row: dtype {}", dtype_name(t.dtype));
  }
}

Logits open_logits(const std::string& path) {
  Logits l;
  l.t = load_tensor(path);
  if (l.t.dtype != DType::float32 && l.t.dtype != DType::bfloat16 && l.t.dtype != DType::float16)
    throw_input_error(path, "dtype", "float32, bfloat16 or float16 logits", dtype_name(l.t.dtype));
  if (l.t.shape.size() != 2 || l.t.shape[0] < 1 || l.t.shape[1] < 1)
    throw_input_error(path, "shape", "[N, vocab] logits with N ≥ 1", l.t.shape_str());
  l.n = l.t.shape[0];
  l.vocab = l.t.shape[1];
  if (l.vocab >= (std::int64_t{1} << 31))
    throw_input_error(path, "shape", "a vocabulary below 2^31", l.t.shape_str());
  return l;
}

RowSummary summarize_row(const float* x, std::int64_t vocab) {
  RowSummary s;
  float mx = -INFINITY;
  std::int32_t arg = -1;
  bool nan = false, neg_inf = false;
  for (std::int64_t i = 0; i < vocab; ++i) {
    float v = x[i];
    nan |= std::isnan(v);
    neg_inf |= v == -INFINITY;
    if (v > mx) mx = v, arg = static_cast<std::int32_t>(i);
  }
  if (nan) s.flags |= kFlagNaN;
  if (mx == INFINITY) s.flags |= kFlagPosInf;
  if (mx == -INFINITY) s.flags |= kFlagNoFinite;
  if (neg_inf) s.flags |= kFlagNegInf;
  s.top1 = arg;
  if (s.flags & kFlagsBroken) return s;
  double sum = 0;
  const double m = mx;
  for (std::int64_t i = 0; i < vocab; ++i) sum += fastmath::exp_f64(static_cast<double>(x[i]) - m);
  s.lse = m + std::log(sum);
  s.top1_logprob = static_cast<float>(m - s.lse);
  return s;
}

void top_k_ids(const float* x, std::int64_t vocab, int k, std::int32_t* ids) {
  // Sorted buffer of the best k so far: (value desc, id asc). Scanning ids in increasing order, an equal
  // value never displaces an earlier (lower) id, which gives the tie rule for free.
  std::vector<std::pair<float, std::int32_t>> top;
  top.reserve(k + 1);
  auto better = [](const std::pair<float, std::int32_t>& a, const std::pair<float, std::int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  for (std::int32_t i = 0; i < k; ++i) top.emplace_back(x[i], i);
  std::sort(top.begin(), top.end(), better);
  float thr = top.back().first;
  for (std::int64_t i = k; i < vocab; ++i) {
    if (!(x[i] > thr)) continue;
    std::pair<float, std::int32_t> e{x[i], static_cast<std::int32_t>(i)};
    top.insert(std::upper_bound(top.begin(), top.end(), e, better), e);
    top.pop_back();
    thr = top.back().first;
  }
  for (int j = 0; j < k; ++j) ids[j] = top[j].second;
}

double tail_logprob(const float* x, std::int64_t vocab, double lse, std::span<const std::int32_t> ids,
                    std::vector<std::uint8_t>& mark) {
  // The tail is 1 − Σ_top p; when that difference keeps < 3 significant digits, sum the tail directly.
  double top = 0;
  for (auto id : ids) top += std::exp(static_cast<double>(x[id]) - lse);
  double tail = 1.0 - top;
  if (tail > 1e-3) return std::log(tail);
  if (mark.size() < static_cast<std::size_t>(vocab)) mark.assign(vocab, 0);
  for (auto id : ids) mark[id] = 1;
  double s = 0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    double e = fastmath::exp_f64(static_cast<double>(x[i]) - lse);
    s += mark[i] ? 0.0 : e;
  }
  for (auto id : ids) mark[id] = 0;
  return std::log(s);  // −inf when the tail is empty
}

namespace {

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path, kDataTextCap, "a segments file");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(path, "syntax", "valid JSON", e.what());
  }
}

}  // namespace

CorpusLayout read_layout(const std::string& path, std::int64_t n) {
  CorpusLayout L;
  L.segment.resize(n);
  L.depth.resize(n);
  L.phase.resize(n);
  if (path.empty()) {
    L.segments.push_back(Segment{"all", "prose", 1, 0, "", {}});
    for (std::int64_t i = 0; i < n; ++i) {
      L.segment[i] = 0;
      L.depth[i] = static_cast<std::int32_t>(std::min<std::int64_t>(i + 1, INT32_MAX));
      L.phase[i] = 0;
    }
    return L;
  }
  nlohmann::json j = read_json_file(path);
  if (j.is_object() && j.contains("segments")) j = j["segments"];
  // The same validation as the golden reader (names, domains, starts, text offsets).
  std::vector<Segment> segs = segments_from_json(j.dump(), path, n);
  std::vector<std::int64_t> decode_from(segs.size(), -1);
  for (std::size_t s = 0; s < segs.size(); ++s) {
    const auto& e = j[s];
    std::string where = fmt::format("segments[{}]", s);
    if (s > 0 && segs[s].start <= segs[s - 1].start)
      throw_input_error(path, where + ".start", fmt::format("> {} (segments in order)", segs[s - 1].start),
                        std::to_string(segs[s].start));
    if (s == 0 && segs[s].start != 0)
      throw_input_error(path, where + ".start", "0", std::to_string(segs[s].start));
    if (e.contains("phase")) {
      if (e["phase"] == "decode")
        decode_from[s] = 0;
      else if (e["phase"] != "prefill")
        throw_input_error(path, where + ".phase", "\"prefill\" or \"decode\"",
                          e["phase"].dump().substr(0, 40));
    }
    if (e.contains("decode_from")) {
      if (!e["decode_from"].is_number_integer() || e["decode_from"].get<std::int64_t>() < 0)
        throw_input_error(path, where + ".decode_from", "an integer ≥ 0",
                          e["decode_from"].dump().substr(0, 40));
      decode_from[s] = e["decode_from"].get<std::int64_t>();
    }
  }
  for (std::size_t s = 0; s < segs.size(); ++s) {
    std::int64_t b = segs[s].start, e = s + 1 < segs.size() ? segs[s + 1].start : n;
    if (b >= n)
      throw_input_error(path, fmt::format("segments[{}].start", s), fmt::format("< {} (positions)", n),
                        std::to_string(b));
    if (!segs[s].offsets.empty() && static_cast<std::int64_t>(segs[s].offsets.size()) != e - b)
      throw_input_error(path, fmt::format("segments[{}].offsets", s),
                        fmt::format("{} offsets (one per position)", e - b),
                        std::to_string(segs[s].offsets.size()));
    for (std::int64_t i = b; i < e; ++i) {
      L.segment[i] = static_cast<std::int32_t>(s);
      L.depth[i] = static_cast<std::int32_t>(std::min<std::int64_t>(segs[s].depth + (i - b), INT32_MAX));
      L.phase[i] = decode_from[s] >= 0 && i - b >= decode_from[s];
    }
  }
  L.segments = std::move(segs);
  return L;
}

std::vector<std::int32_t> read_next_tokens(const std::string& path, std::int64_t n, std::int64_t vocab) {
  Tensor t = load_tensor(path);
  if (!is_integer(t.dtype)) throw_input_error(path, "dtype", "integer token ids", dtype_name(t.dtype));
  if (t.shape.size() != 1 || (t.shape[0] != n && t.shape[0] != n + 1))
    throw_input_error(path, "shape", fmt::format("[{}] (next tokens) or [{}] (whole sequence)", n, n + 1),
                      t.shape_str());
  std::int64_t off = t.shape[0] == n + 1 ? 1 : 0;
  std::vector<std::int32_t> out(n);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t v = int_at(t.dtype, t.bytes, i + off);
    if (v < 0 || v >= vocab)
      throw_input_error(path, fmt::format("token[{}]", i + off), fmt::format("an id in [0, {})", vocab),
                        std::to_string(v));
    out[i] = static_cast<std::int32_t>(v);
  }
  return out;
}

GoldenBuffers record_golden(const Logits& L, std::span<const std::int32_t> next, const CorpusLayout& layout,
                            int k) {
  const std::int64_t n = L.n, v = L.vocab;
  if (k < 2 || k > v || k > 4096)
    fail("{}: -k: expected 2 ≤ k ≤ min(vocab = {}, 4096), got {}", L.t.origin, v, k);
  GoldenBuffers g;
  g.k = k;
  g.top_ids.resize(n * k);
  g.top_logprobs.resize(n * k);
  g.other_logprob.resize(n);
  g.token.assign(next.begin(), next.end());
  g.token_logprob.resize(n);
  g.segment = layout.segment;
  g.depth = layout.depth;
  g.phase = layout.phase;
  g.flags.resize(n);
  parallel_for(n, 16, [&](std::size_t, std::size_t b, std::size_t e) {
    std::vector<float> row(v);
    std::vector<std::uint8_t> mark;
    for (std::size_t i = b; i < e; ++i) {
      L.row(i, row.data());
      RowSummary s = summarize_row(row.data(), v);
      g.flags[i] = s.flags;
      if (s.flags & kFlagsBroken)
        fail("{}: row {}: expected finite reference logits (a golden must be clean), got {}", L.t.origin, i,
             s.flags & kFlagNaN      ? "NaN"
             : s.flags & kFlagPosInf ? "+inf"
                                     : "no finite value");
      std::int32_t* ids = &g.top_ids[i * k];
      top_k_ids(row.data(), v, k, ids);
      for (int j = 0; j < k; ++j) g.top_logprobs[i * k + j] = static_cast<float>(row[ids[j]] - s.lse);
      g.other_logprob[i] =
          static_cast<float>(tail_logprob(row.data(), v, s.lse, {ids, static_cast<std::size_t>(k)}, mark));
      g.token_logprob[i] = static_cast<float>(row[next[i]] - s.lse);
    }
  });
  return g;
}

CandidateBuffers record_candidate(const Logits& L, const Golden& g, std::int64_t begin, std::int64_t end) {
  const int k = g.meta.k;
  const std::int64_t v = L.vocab, n = end - begin;
  if (v != g.meta.vocab)
    throw_input_error(L.t.origin, "shape", fmt::format("[N, {}] (the golden's vocabulary)", g.meta.vocab),
                      L.t.shape_str());
  if (L.n != n)
    throw_input_error(L.t.origin, "shape",
                      fmt::format("[{}, {}] (the golden's positions [{}, {}))", n, v, begin, end),
                      L.t.shape_str());
  CandidateBuffers c;
  c.k = k;
  c.logprobs_at_ref.resize(n * k);
  c.other_logprob.resize(n);
  c.top1_id.resize(n);
  c.top1_logprob.resize(n);
  c.token_logprob.resize(n);
  c.flags.resize(n);
  parallel_for(n, 16, [&](std::size_t, std::size_t b, std::size_t e) {
    std::vector<float> row(v);
    std::vector<std::uint8_t> mark;
    for (std::size_t i = b; i < e; ++i) {
      const std::int64_t gi = begin + static_cast<std::int64_t>(i);
      L.row(i, row.data());
      RowSummary s = summarize_row(row.data(), v);
      c.flags[i] = s.flags;
      c.top1_id[i] = s.top1;
      std::span<const std::int32_t> ids = g.a.top_ids.subspan(gi * k, k);
      if (s.flags & kFlagsBroken) {  // keep the row visible as non-finite; the judge fails it
        for (int j = 0; j < k; ++j) c.logprobs_at_ref[i * k + j] = NAN;
        c.other_logprob[i] = NAN;
        c.top1_logprob[i] = NAN;
        c.token_logprob[i] = NAN;
        if (c.top1_id[i] < 0) c.top1_id[i] = 0;
        continue;
      }
      for (int j = 0; j < k; ++j) c.logprobs_at_ref[i * k + j] = static_cast<float>(row[ids[j]] - s.lse);
      c.other_logprob[i] = static_cast<float>(tail_logprob(row.data(), v, s.lse, ids, mark));
      c.top1_logprob[i] = s.top1_logprob;
      c.token_logprob[i] = static_cast<float>(row[g.a.token[gi]] - s.lse);
    }
  });
  return c;
}

}  // namespace kc
