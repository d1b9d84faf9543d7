// llama.cpp KLD base file: reader (LlamaKldFile) and its two imports (as golden, as candidate).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "golden/importers.h"
#include "golden/llamacpp_kld.h"
#include "numeric/fastmath.h"

namespace kc {

namespace {

template <typename T>
T load_le(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // x86/ARM little-endian hosts only (as llama.cpp itself)
  return v;
}

constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 4;

}  // namespace

std::uint64_t llamacpp_kld_file_bytes(std::uint64_t n_ctx, std::uint64_t n_vocab, std::uint64_t n_chunk) {
  std::uint64_t nv = 2 * ((n_vocab + 1) / 2) + 4;
  std::uint64_t scored = n_ctx >= 2 ? n_ctx - 1 - n_ctx / 2 : 0;
  return kHeaderBytes + 4 * n_ctx * n_chunk + 2 * nv * scored * n_chunk;
}

LlamaKldFile LlamaKldFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse(file->bytes(), path, file);
}

LlamaKldFile LlamaKldFile::parse(std::span<const std::uint8_t> b, const std::string& path,
                                 std::shared_ptr<const void> owner) {
  LlamaKldFile f;
  f.path_ = path;
  f.bytes_ = b;
  f.owner_ = std::move(owner);
  if (b.size() < kHeaderBytes || std::memcmp(b.data(), "_logits_", 8) != 0)
    throw_input_error(path, "magic",
                      "\"_logits_\" and a 20-byte header (llama-perplexity --kl-divergence-base)",
                      b.size() < 8 ? fmt::format("{} bytes", b.size()) : "other bytes");
  f.n_ctx_ = load_le<std::uint32_t>(b.data() + 8);
  f.n_vocab_ = load_le<std::int32_t>(b.data() + 12);
  f.n_chunk_ = load_le<std::int32_t>(b.data() + 16);
  // 2^24 tokens of context and 2^26 vocabulary entries are far beyond any model; they bound the arithmetic.
  if (f.n_ctx_ < 3 || f.n_ctx_ > (1u << 24))
    throw_input_error(path, "n_ctx", "3 ≤ n_ctx ≤ 2^24 (at least one scored token per chunk)",
                      std::to_string(f.n_ctx_));
  if (f.n_vocab_ < 2 || f.n_vocab_ > (1 << 26))
    throw_input_error(path, "n_vocab", "2 ≤ n_vocab ≤ 2^26", std::to_string(f.n_vocab_));
  if (f.n_chunk_ < 1) throw_input_error(path, "n_chunk", "n_chunk ≥ 1", std::to_string(f.n_chunk_));
  std::uint64_t want = llamacpp_kld_file_bytes(f.n_ctx_, f.n_vocab_, f.n_chunk_);
  if (b.size() != want) {
    std::uint64_t tok_end = kHeaderBytes + 4ull * f.n_ctx_ * f.n_chunk_;
    std::uint64_t per_chunk = 2ull * f.record_u16() * f.scored_per_chunk();
    std::string got = fmt::format("{} bytes", b.size());
    if (b.size() > tok_end) got += fmt::format(" ({} whole chunks)", (b.size() - tok_end) / per_chunk);
    throw_input_error(
        path, "size",
        fmt::format("{} bytes for n_ctx {}, n_vocab {}, n_chunk {} (an interrupted run leaves it short)",
                    want, f.n_ctx_, f.n_vocab_, f.n_chunk_),
        got);
  }
  std::size_t n_tok = static_cast<std::size_t>(f.n_ctx_) * static_cast<std::size_t>(f.n_chunk_);
  f.tokens_.resize(n_tok);
  std::memcpy(f.tokens_.data(), b.data() + kHeaderBytes, n_tok * 4);
  for (std::size_t i = 0; i < n_tok; ++i) {
    if (f.tokens_[i] < 0 || f.tokens_[i] >= f.n_vocab_)
      throw_input_error(path,
                        fmt::format("tokens[{}] (chunk {}, position {})", i, i / f.n_ctx_, i % f.n_ctx_),
                        fmt::format("a token id in [0, {})", f.n_vocab_), std::to_string(f.tokens_[i]));
  }
  f.records_offset_ = kHeaderBytes + n_tok * 4;
  return f;
}

std::uint16_t LlamaKldFile::Row::code(std::int32_t id) const {
  KC_ASSERT(id >= 0 && id < n_vocab, "token id {} outside [0, {})", id, n_vocab);
  return load_le<std::uint16_t>(q + 2 * static_cast<std::size_t>(id));
}

LlamaKldFile::Row LlamaKldFile::row(std::size_t r) const {
  KC_ASSERT(r < n_records(), "record {} of {}", r, n_records());
  const std::uint8_t* p = bytes_.data() + records_offset_ + 2 * record_u16() * r;
  Row row;
  row.scale = load_le<float>(p);
  row.min_log_prob = load_le<float>(p + 4);
  row.q = p + 8;
  row.n_vocab = n_vocab_;
  // scale = range/65535 with range ≤ 16 nats; min_log_prob ≥ −16 − log(n_vocab) − (rounding).
  float min_lp_floor = -16.0f - std::log(static_cast<float>(n_vocab_)) - 1.0f;
  if (!std::isfinite(row.scale) || row.scale < 0 || row.scale * 65535.0f > 16.001f)
    throw_input_error(
        path_,
        fmt::format("record {} (chunk {}, row {}): scale", r, r / scored_per_chunk(), r % scored_per_chunk()),
        "a finite value in [0, 16/65535]", fmt::format("{}", row.scale));
  if (!std::isfinite(row.min_log_prob) || row.min_log_prob > 1e-3f || row.min_log_prob < min_lp_floor)
    throw_input_error(path_,
                      fmt::format("record {} (chunk {}, row {}): min_log_prob", r, r / scored_per_chunk(),
                                  r % scored_per_chunk()),
                      fmt::format("a finite log-prob in [{}, 0]", min_lp_floor),
                      fmt::format("{}", row.min_log_prob));
  // The writer clamps the range at 16 nats; a range that reached it means codes of 0 are only bounded.
  row.clamped = row.scale * 65535.0f >= 16.0f * (1.0f - 1e-6f);
  return row;
}

void LlamaKldFile::top_k(const Row& row, int k, std::vector<std::int32_t>& ids) {
  KC_ASSERT(k >= 1 && k <= row.n_vocab, "k {} with vocabulary {}", k, row.n_vocab);
  // Keep the k best (code, id) in a small sorted buffer; after the first k, most codes fall below the
  // k-th best and cost one compare.
  std::vector<std::pair<std::uint16_t, std::int32_t>> best;
  best.reserve(k + 1);
  int threshold = -1;
  for (std::int32_t i = 0; i < row.n_vocab; ++i) {
    std::uint16_t c = load_le<std::uint16_t>(row.q + 2 * static_cast<std::size_t>(i));
    if (static_cast<int>(c) <= threshold) continue;  // equal codes keep the earlier (smaller) id
    auto pos = std::upper_bound(best.begin(), best.end(), c,
                                [](std::uint16_t v, const auto& e) { return v > e.first; });
    best.insert(pos, {c, i});
    if (static_cast<int>(best.size()) > k) best.pop_back();
    if (static_cast<int>(best.size()) == k) threshold = best.back().first;
  }
  ids.clear();
  for (auto& e : best) ids.push_back(e.second);
}

// ---- imports -------------------------------------------------------------------------------------------

float llamacpp_tail_logprob(const LlamaKldFile::Row& row, std::span<const std::int32_t> exclude_sorted) {
  // Sum exp(log p) in blocks (vectorised exp): over the tail directly (never 1 − Σ top-k, which the
  // 16-bit codes make too coarse for a small tail), and over every id the clamp did not erase.
  constexpr std::int32_t kBlock = 1024;
  float lp[kBlock];
  std::uint8_t excluded[kBlock];
  double tail = 0, all = 0;
  std::int64_t erased = 0;
  std::size_t ex = 0;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (std::int32_t b0 = 0; b0 < row.n_vocab; b0 += kBlock) {
    const std::int32_t nb = std::min(kBlock, row.n_vocab - b0);
    std::uint16_t codes[kBlock];
    std::memcpy(codes, row.q + 2 * static_cast<std::size_t>(b0), 2 * static_cast<std::size_t>(nb));
    for (std::int32_t i = 0; i < nb; ++i) {
      bool gone = row.clamped && codes[i] == 0;
      lp[i] = gone ? neg_inf : row.scale * static_cast<float>(codes[i]) + row.min_log_prob;
      excluded[i] = 0;
    }
    for (; ex < exclude_sorted.size() && exclude_sorted[ex] < b0 + nb; ++ex)
      excluded[exclude_sorted[ex] - b0] = 1;
    float block_tail = 0, block_all = 0;
    for (std::int32_t i = 0; i < nb; ++i) {
      erased += lp[i] == neg_inf && !excluded[i];
      float p = fastmath::exp_f32(lp[i]);
      block_all += p;
      block_tail += excluded[i] ? 0.0f : p;
    }
    tail += block_tail;
    all += block_all;
  }
  // Erased tail ids hold between 0 and exp(min_log_prob) each; 1 − Σ(non-erased) estimates their total,
  // kept inside that range.
  if (erased > 0) {
    double doubt = static_cast<double>(erased) * std::exp(static_cast<double>(row.min_log_prob));
    tail += std::clamp(1.0 - all, 0.0, doubt);
  }
  return tail > 0 ? static_cast<float>(std::log(tail)) : neg_inf;
}

void golden_from_llamacpp(const LlamaKldFile& f, int k, const std::string& domain, GoldenMeta& meta,
                          GoldenBuffers& out) {
  if (k < 1 || k > f.n_vocab())
    throw_input_error(f.path(), "-k", fmt::format("1 ≤ k ≤ n_vocab = {}", f.n_vocab()), std::to_string(k));
  const std::size_t N = f.n_records(), spc = f.scored_per_chunk(), first = f.first();
  meta.k = k;
  meta.vocab = f.n_vocab();
  meta.n = static_cast<std::int64_t>(N);
  meta.identity.corpus = corpus_identity_of_tokens(f.tokens());
  meta.segments.clear();
  for (std::int32_t c = 0; c < f.n_chunk(); ++c) {
    Segment s;
    s.name = fmt::format("chunk {}", c);
    s.domain = domain;
    s.depth = f.n_ctx();
    s.start = static_cast<std::int64_t>(c) * static_cast<std::int64_t>(spc);
    meta.segments.push_back(std::move(s));
  }
  out.k = k;
  out.top_ids.assign(N * k, 0);
  out.top_logprobs.assign(N * k, 0);
  out.other_logprob.assign(N, 0);
  out.token.assign(N, 0);
  out.token_logprob.assign(N, 0);
  out.segment.assign(N, 0);
  out.depth.assign(N, 0);
  out.phase.assign(N, 0);
  out.flags.assign(N, 0);
  parallel_for(N, 64, [&](std::size_t, std::size_t b, std::size_t e) {
    std::vector<std::int32_t> ids, sorted;
    for (std::size_t r = b; r < e; ++r) {
      LlamaKldFile::Row row = f.row(r);
      const std::size_t chunk = r / spc, i = r % spc;
      const std::int32_t tok = f.tokens()[chunk * f.n_ctx() + first + i + 1];
      LlamaKldFile::top_k(row, k, ids);
      for (int j = 0; j < k; ++j) {
        out.top_ids[r * k + j] = ids[j];
        out.top_logprobs[r * k + j] = std::min(row.log_prob(ids[j]), 0.0f);
      }
      sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      out.other_logprob[r] = std::min(llamacpp_tail_logprob(row, sorted), 0.0f);
      out.token[r] = tok;
      out.token_logprob[r] = std::min(row.log_prob(tok), 0.0f);  // ≤ min_log_prob when erased by the clamp
      out.segment[r] = static_cast<std::int32_t>(chunk);
      out.depth[r] = static_cast<std::int32_t>(first + i + 1);
    }
  });
}

CandidateBuffers candidate_from_llamacpp(const Golden& g, const LlamaKldFile& f, ImportStats* stats) {
  if (g.meta.vocab != f.n_vocab())
    throw_input_error(f.path(), "n_vocab",
                      fmt::format("{} (the vocabulary of the golden {})", g.meta.vocab, g.path),
                      std::to_string(f.n_vocab()));
  const std::int64_t N = g.meta.n;
  const int k = g.meta.k;
  const std::size_t spc = f.scored_per_chunk(), first = f.first();
  // Check the alignment first, in golden order, so the error names the first differing position.
  std::vector<std::size_t> record(N);
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t s = g.a.segment[n], d = g.a.depth[n];
    const std::int64_t i = d - static_cast<std::int64_t>(first) - 1;
    if (s >= f.n_chunk() || i < 0 || i >= static_cast<std::int64_t>(spc))
      throw_input_error(
          f.path(), fmt::format("chunk {}", s),
          fmt::format("a scored row at depth {} for golden position {} (the file scores chunks 0…{} at "
                      "depths {}…{})",
                      d, n, f.n_chunk() - 1, first + 1, f.n_ctx() - 1),
          "none");
    const std::int32_t tok =
        f.tokens()[static_cast<std::size_t>(s) * f.n_ctx() + static_cast<std::size_t>(d)];
    if (tok != g.a.token[n])
      throw_input_error(
          f.path(), fmt::format("tokens[{}] (chunk {}, position {})", s * f.n_ctx() + d, s, d),
          fmt::format("token {} as in the golden at position {} (first difference)", g.a.token[n], n),
          std::to_string(tok));
    record[n] = static_cast<std::size_t>(s) * spc + static_cast<std::size_t>(i);
  }
  CandidateBuffers out;
  out.k = k;
  out.logprobs_at_ref.assign(N * k, 0);
  out.other_logprob.assign(N, 0);
  out.top1_id.assign(N, 0);
  out.top1_logprob.assign(N, 0);
  out.token_logprob.assign(N, 0);
  out.flags.assign(N, 0);
  out.covered.assign(N * k, 1);
  std::vector<std::int64_t> covered_count(N, 0);
  parallel_for(N, 64, [&](std::size_t, std::size_t b, std::size_t e) {
    std::vector<std::int32_t> top1, sorted(k);
    for (std::size_t n = b; n < e; ++n) {
      LlamaKldFile::Row row = f.row(record[n]);
      const std::int32_t* ref = g.a.top_ids.data() + n * k;
      int cov = 0;
      for (int j = 0; j < k; ++j) {
        bool exact = row.exact(ref[j]);
        out.logprobs_at_ref[n * k + j] =
            std::min(row.log_prob(ref[j]), 0.0f);  // erased: the bound min_log_prob
        out.covered[n * k + j] = exact ? 1 : 0;
        cov += exact;
      }
      covered_count[n] = cov;
      std::copy(ref, ref + k, sorted.begin());
      std::sort(sorted.begin(), sorted.end());
      out.other_logprob[n] = llamacpp_tail_logprob(row, sorted);
      LlamaKldFile::top_k(row, 1, top1);
      out.top1_id[n] = top1[0];
      out.top1_logprob[n] = std::min(row.log_prob(top1[0]), 0.0f);
      const std::int32_t tok = g.a.token[n];
      if (row.exact(tok)) {
        out.token_logprob[n] = std::min(row.log_prob(tok), 0.0f);
      } else {
        out.token_logprob[n] = std::numeric_limits<float>::quiet_NaN();
        out.flags[n] |= kFlagTokenUnknown;
      }
    }
  });
  ImportStats st;
  st.positions = N;
  st.ids = N * k;
  for (std::int64_t n = 0; n < N; ++n) {
    st.ids_covered += covered_count[n];
    st.positions_fully_covered += covered_count[n] == k;
    st.token_unknown += (out.flags[n] & kFlagTokenUnknown) != 0;
  }
  st.min_reported = f.n_vocab();
  if (st.ids_covered == st.ids) out.covered.clear();  // every id covered: leave the mask out
  if (stats) *stats = st;
  return out;
}

}  // namespace kc
