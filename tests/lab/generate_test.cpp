// Generation (src/lab/generate.h): the SplitMix64 stream, the top-p-truncated sampling distribution
// against an independent long-double computation, a chi-square test of the sampler's empirical token
// frequencies on a tiny model, greedy = argmax of the engine's logits, seeded reproducibility, prompts
// files, ChatML prompts, answer corpora.
#include "lab/generate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"
#include "../golden/test_tokenizer.h"

namespace kc {
namespace {

std::string fixture(const std::string& name) { return std::string(KC_TEST_DATA) + "/fixtures/" + name; }

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kc_generate_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SplitMix64, ReferenceStream) {
  // Vigna's splitmix64.c with x = 0: the first outputs.
  SplitMix64 r(0);
  EXPECT_EQ(r.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(r.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(r.next(), 0x06C45D188009454Full);
  SplitMix64 u(1234);
  for (int i = 0; i < 1000; ++i) {
    double x = u.uniform();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
  }
}

// The truncated distribution computed independently: long double softmax of l/T, sort (p desc, id asc),
// keep while the mass before a token is < top_p.
std::map<std::int32_t, long double> expected_distribution(const std::vector<float>& l, double T,
                                                          double top_p) {
  long double mx = *std::max_element(l.begin(), l.end()), z = 0;
  std::vector<std::pair<long double, std::int32_t>> p;
  for (std::size_t i = 0; i < l.size(); ++i) {
    long double e = std::exp((static_cast<long double>(l[i]) - mx) / T);
    z += e;
    p.push_back({e, static_cast<std::int32_t>(i)});
  }
  std::sort(p.begin(), p.end(), [](auto& a, auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  std::map<std::int32_t, long double> out;
  long double before = 0, kept = 0;
  for (auto& [e, id] : p) {
    if (before >= top_p) break;
    out[id] = e / z;
    before += e / z;
    kept += e / z;
  }
  for (auto& [id, q] : out) q /= kept;
  return out;
}

TEST(Sampling, TruncatedDistributionMatchesIndependentComputation) {
  std::vector<float> l = {2.0f, 1.0f, 0.5f, 0.5f, -1.0f, 3.0f, -4.0f, 0.0f};
  for (double T : {0.3, 1.0, 2.5})
    for (double top_p : {0.2, 0.5, 0.9, 0.99, 1.0}) {
      SCOPED_TRACE(fmt::format("T {} top_p {}", T, top_p));
      TruncatedDistribution d = sampling_distribution(l, T, top_p);
      auto want = expected_distribution(l, T, top_p);
      ASSERT_EQ(d.ids.size(), want.size());
      double sum = 0;
      for (std::size_t i = 0; i < d.ids.size(); ++i) {
        ASSERT_TRUE(want.count(d.ids[i]));
        EXPECT_NEAR(d.probs[i], static_cast<double>(want[d.ids[i]]), 1e-14);
        if (i) {
          EXPECT_GE(d.probs[i - 1], d.probs[i]);
        }
        sum += d.probs[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-14);
    }
  // Ties keep the lower id first; top_p tiny keeps the argmax only.
  auto d = sampling_distribution(std::vector<float>{1, 1, 0}, 1.0, 0.4);
  EXPECT_EQ(d.ids, std::vector<std::int32_t>{0});
  d = sampling_distribution(std::vector<float>{1, 1, 0}, 1.0, 0.5);
  EXPECT_EQ(d.ids, (std::vector<std::int32_t>{0, 1}));
  // Greedy: argmax, lowest id on ties, no draw.
  SplitMix64 r(5);
  SamplingOptions g;
  EXPECT_EQ(sample_token(std::vector<float>{0, 3, 3, 1}, g, r), 1);
  expect_error([&] { sample_token(std::vector<float>{0, NAN}, g, r); }, "expected finite logits");
}

// Wilson–Hilferty: the chi-square quantile for df degrees of freedom at the normal quantile z.
double chi2_quantile(double df, double z) {
  double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Counts of N draws against N·p of the truncated softmax: Pearson's chi-square, bins with N·p < 5 pooled.
double chi_square(const std::map<std::int32_t, std::int64_t>& counts,
                  const std::map<std::int32_t, long double>& p, std::int64_t N, int& df) {
  double stat = 0, pool_e = 0, pool_o = 0;
  int bins = 0;
  for (auto& [id, q] : p) {
    double e = static_cast<double>(q) * N;
    double o = counts.count(id) ? static_cast<double>(counts.at(id)) : 0;
    if (e < 5) {
      pool_e += e, pool_o += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    ++bins;
  }
  if (pool_e > 0) {
    stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
    ++bins;
  }
  df = bins - 1;
  return stat;
}

TEST(Sampling, EmpiricalFrequenciesMatchTopPSoftmaxOnTinyModel) {
  auto m = load_causal_lm(fixture("llama-tiny"));
  auto st = m->new_state();
  const std::vector<std::int32_t> prompt = {17, 301, 44, 9, 250, 3, 77};
  m->prefill(*st, std::span(prompt).first(prompt.size() - 1),
             [](std::size_t, std::size_t, std::span<const float>) {});
  const std::vector<float> logits = m->decode(*st, prompt.back());
  constexpr std::int64_t N = 40000;
  for (auto [T, top_p] : {std::pair{1.0, 1.0}, {0.7, 0.8}, {1.5, 0.5}}) {
    SCOPED_TRACE(fmt::format("T {} top_p {}", T, top_p));
    SamplingOptions o{false, T, top_p, 20251130};
    SplitMix64 rng(o.seed);
    std::map<std::int32_t, std::int64_t> counts;
    for (std::int64_t i = 0; i < N; ++i) ++counts[sample_token(logits, o, rng)];
    auto p = expected_distribution(logits, T, top_p);
    for (auto& [id, c] : counts) ASSERT_TRUE(p.count(id)) << "token " << id << " is outside the top-p set";
    ASSERT_GT(p.size(), 3u) << "the test needs a spread distribution";
    int df = 0;
    double stat = chi_square(counts, p, N, df);
    // p = 1e-4 upper quantile (z = 3.719): a correct sampler fails this with probability 1e-4, and the seed
    // is fixed, so the outcome is fixed too.
    EXPECT_LT(stat, chi2_quantile(df, 3.719)) << "df " << df;
    // The same test against the untruncated T = 1 softmax must fail when the truncation or T matter.
    if (top_p < 1) {
      auto full = expected_distribution(logits, 1.0, 1.0);
      int df2 = 0;
      const double stat2 = chi_square(counts, full, N, df2);  // sets df2 before the quantile reads it
      EXPECT_GT(stat2, chi2_quantile(df2, 3.719));
    }
  }
}

TEST(Generate, GreedyIsArgmaxOfEngineLogitsAndSampledIsSeeded) {
  auto m = load_causal_lm(fixture("qwen3-tiny"));
  const std::vector<std::int32_t> prompt = {5, 100, 200, 300, 400, 7, 8};
  GenerateOptions o;
  o.max_tokens = 20;
  Generation g = generate(*m, prompt, o);
  ASSERT_EQ(g.tokens.size(), 20u);
  EXPECT_EQ(g.stop_reason, "max_tokens");
  // Recompute with the same path (prefill n − 1, decode the rest): every token is the argmax of its row.
  auto st = m->new_state();
  std::vector<std::int32_t> all = prompt;
  all.insert(all.end(), g.tokens.begin(), g.tokens.end());
  m->prefill(*st, std::span(all).first(prompt.size() - 1),
             [](std::size_t, std::size_t, std::span<const float>) {});
  for (std::size_t i = 0; i < g.tokens.size(); ++i) {
    std::vector<float> row = m->decode(*st, all[prompt.size() - 1 + i]);
    auto best = std::max_element(row.begin(), row.end()) - row.begin();
    EXPECT_EQ(g.tokens[i], best) << "step " << i;
    std::vector<float> sorted = row;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    EXPECT_EQ(g.steps[i].margin, sorted[0] - sorted[1]);
    double z = 0;
    for (float x : row) z += std::exp(static_cast<double>(x) - sorted[0]);
    EXPECT_NEAR(g.steps[i].logprob, -std::log(z), 1e-9);
  }
  // Stop tokens end the generation, kept as its last token.
  GenerateOptions s = o;
  s.stop_ids = {g.tokens[3]};
  Generation gs = generate(*m, prompt, s);
  EXPECT_EQ(gs.stop_reason, "stop_token");
  EXPECT_EQ(gs.tokens.back(), g.tokens[3]);
  EXPECT_LE(gs.tokens.size(), 4u);

  GenerateOptions r;
  r.max_tokens = 24;
  r.sampling = {false, 1.0, 0.95, 42};
  Generation a = generate(*m, prompt, r), b = generate(*m, prompt, r);
  EXPECT_EQ(a.tokens, b.tokens);
  r.sampling.seed = 43;
  Generation c = generate(*m, prompt, r);
  EXPECT_NE(a.tokens, c.tokens);
  EXPECT_EQ(first_divergence(a, a), std::nullopt);
  auto d = first_divergence(a, c);
  ASSERT_TRUE(d);
  for (std::size_t i = 0; i < *d; ++i) EXPECT_EQ(a.tokens[i], c.tokens[i]);
  EXPECT_NE(a.tokens[*d], c.tokens[*d]);
}

TEST(Generate, BadOptions) {
  auto m = load_causal_lm(fixture("llama-tiny"));
  GenerateOptions o;
  o.max_tokens = 0;
  expect_error([&] { generate(*m, std::vector<std::int32_t>{1, 2}, o); }, "--max-tokens: expected 1");
  o.max_tokens = 4;
  o.sampling = {false, 0.0, 1.0, 0};
  expect_error(
      [&] {
        generate(*m, std::vector<std::int32_t>{1, 2}, o);
      },
      "--temperature: expected a finite value > 0");
  o.sampling = {false, 1.0, 1.5, 0};
  expect_error(
      [&] {
        generate(*m, std::vector<std::int32_t>{1, 2}, o);
      },
      "--top-p: expected a value in (0, 1]");
  o.sampling = {};
  expect_error([&] { generate(*m, std::vector<std::int32_t>{}, o); }, "prompt: expected at least one token");
  expect_error(
      [&] {
        generate(*m, std::vector<std::int32_t>{1, 512}, o);
      },
      "prompt: token 1: expected an id in [0, 512)");
}

TEST(Generate, ChatPromptAndStopIds) {
  const Tokenizer tok = test_tokenizer();
  auto ids = encode_prompt(tok, "the day", true, "Be brief");
  EXPECT_EQ(tok.decode(ids),
            "<|im_start|>system\nBe brief<|im_end|>\n<|im_start|>user\nthe day<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(ids[0], *tok.token_id("<|im_start|>"));
  // The user's text is not parsed for special tokens.
  auto inj = encode_prompt(tok, "<|im_end|>", false);
  EXPECT_EQ(std::count(inj.begin(), inj.end(), *tok.token_id("<|im_end|>")), 0);
  auto nosys = encode_prompt(tok, "x", true, "");
  EXPECT_EQ(tok.decode(nosys), "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(default_stop_ids(tok, false), std::vector<std::int32_t>{*tok.token_id("<|endoftext|>")});
  EXPECT_EQ(default_stop_ids(tok, true),
            (std::vector<std::int32_t>{*tok.token_id("<|endoftext|>"), *tok.token_id("<|im_end|>")}));
}

TEST(Generate, PromptsFile) {
  const std::string f = tmp("prompts.txt");
  {
    std::ofstream o(f, std::ios::binary);
    o << "first prompt\n\n  \r\n{\"prompt\": \"two\\nlines\"}\r\nlast";
  }
  auto p = read_prompts(f);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].text, "first prompt");
  EXPECT_EQ(p[0].line, 1);
  EXPECT_EQ(p[1].text, "two\nlines");
  EXPECT_EQ(p[1].line, 4);
  EXPECT_EQ(p[1].byte_offset, 18);
  EXPECT_EQ(p[2].text, "last");
  {
    std::ofstream o(f, std::ios::binary);
    o << "ok\n{\"text\": 1}\n";
  }
  expect_error([&] { read_prompts(f); }, "line 2: prompt: expected a string field \"prompt\"");
  {
    std::ofstream o(f, std::ios::binary);
    o << "ok\n{broken\n";
  }
  expect_error([&] { read_prompts(f); }, "line 2: expected a JSON object");
  {
    std::ofstream o(f, std::ios::binary);
    o << "\n  \n";
  }
  expect_error([&] { read_prompts(f); }, "expected at least one non-blank line");
  std::filesystem::remove(f);
}

TEST(AnswerCorpus, SegmentsAreThePromptsAndTheirAnswers) {
  auto m = load_causal_lm(fixture("llama-tiny"));
  const Tokenizer tok = test_tokenizer();
  std::vector<PromptLine> prompts = {{"the evening", 1, 0}, {"and the morning were", 2, 12}};
  AnswerCorpusOptions o;
  o.gen.max_tokens = 10;
  o.gen.sampling = {false, 0.9, 0.95, 11};
  o.prompts_path = "p.txt";
  o.model_path = "llama-tiny";
  o.model_identity = "model-xxh3:test";
  Corpus c = build_answer_corpus(*m, tok, prompts, o);
  Corpus c2 = build_answer_corpus(*m, tok, prompts, o);
  EXPECT_EQ(c.tokens, c2.tokens);
  ASSERT_EQ(c.segments.size(), 2u);
  EXPECT_EQ(c.preset, "answers");
  std::int64_t begin = 0;
  for (std::size_t k = 0; k < 2; ++k) {
    const CorpusSegment& s = c.segments[k];
    auto prompt = encode_prompt(tok, prompts[k].text, false);
    auto w = c.window(s);
    EXPECT_EQ(s.token_begin, begin);
    EXPECT_EQ(s.domain, "answer");
    EXPECT_EQ(s.name, fmt::format("answer-{}", k));
    EXPECT_EQ(s.source, fmt::format("p.txt:{}", k + 1));
    EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), w.begin()));
    EXPECT_EQ(s.depth + 1, static_cast<std::int64_t>(prompt.size()) + s.decode_last);
    // The answer is what generate() gives with the per-prompt seed the metadata documents.
    GenerateOptions g = o.gen;
    g.stop_ids = default_stop_ids(tok, false);
    g.sampling.seed = SplitMix64(o.gen.sampling.seed ^ (0xA24BAED4963EE407ull * (k + 1))).next();
    Generation want = generate(*m, prompt, g);
    EXPECT_TRUE(std::equal(want.tokens.begin(), want.tokens.end(), w.begin() + prompt.size()));
    EXPECT_EQ(static_cast<std::size_t>(s.decode_last), want.tokens.size());
    begin += s.depth + 1;
  }
  auto gj = nlohmann::json::parse(c.generation);
  EXPECT_EQ(gj["temperature"], 0.9);
  EXPECT_EQ(gj["top_p"], 0.95);
  EXPECT_EQ(gj["seed"], 11);
  EXPECT_EQ(gj["model_identity"], "model-xxh3:test");
  EXPECT_EQ(gj["greedy"], false);
  EXPECT_EQ(gj["max_tokens"], 10);
  // A one-token prompt cannot make an answer segment (one prefill position at least).
  expect_error([&] { build_answer_corpus(*m, tok, {{"x", 3, 0}}, o); }, "p.txt: line 3: prompt:");
}

}  // namespace
}  // namespace kc
