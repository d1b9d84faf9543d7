#include "lab/generate.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"

namespace kc {

using json = nlohmann::json;

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (x_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

namespace {

// Index of the largest logit, lowest id on ties (NaN never wins: the engine's logits are finite).
std::int32_t argmax(std::span<const float> l) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < l.size(); ++i)
    if (l[i] > l[best]) best = i;
  return static_cast<std::int32_t>(best);
}

void check_row(std::span<const float> logits) {
  KC_ASSERT(!logits.empty(), "generate: the model returned an empty logits row");
  for (float x : logits)
    if (!std::isfinite(x))
      fail("model output: logits: expected finite logits to sample from (the weights or the variant give "
           "non-finite ones), got {}",
           x);
}

}  // namespace

TruncatedDistribution sampling_distribution(std::span<const float> logits, double temperature, double top_p) {
  check_row(logits);
  const std::size_t V = logits.size();
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(V);
  double z = 0;
  for (std::size_t i = 0; i < V; ++i) z += p[i] = std::exp((logits[i] - mx) / temperature);
  std::vector<std::int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  // Stable order: probability descending, then id ascending — independent of the sort algorithm.
  std::sort(order.begin(), order.end(),
            [&](std::int32_t a, std::int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  TruncatedDistribution d;
  double cum = 0;
  for (std::int32_t id : order) {
    d.ids.push_back(id);
    d.probs.push_back(p[id] / z);
    cum += p[id] / z;
    if (cum >= top_p) break;
  }
  const double kept = std::accumulate(d.probs.begin(), d.probs.end(), 0.0);
  for (auto& q : d.probs) q /= kept;
  return d;
}

std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, SplitMix64& rng) {
  if (o.greedy) {
    check_row(logits);
    return argmax(logits);
  }
  TruncatedDistribution d = sampling_distribution(logits, o.temperature, o.top_p);
  const double u = rng.uniform();
  double cum = 0;
  for (std::size_t i = 0; i < d.ids.size(); ++i) {
    cum += d.probs[i];
    if (u < cum) return d.ids[i];
  }
  return d.ids.back();  // u within rounding of 1
}

void check_generate_options(const GenerateOptions& o) {
  if (o.max_tokens < 1 || o.max_tokens > (1 << 20))
    fail("--max-tokens: expected 1 … 2^20, got {}", o.max_tokens);
  if (!o.sampling.greedy) {
    if (!(o.sampling.temperature > 0) || !std::isfinite(o.sampling.temperature))
      fail("--temperature: expected a finite value > 0 (use --greedy for argmax), got {}",
           o.sampling.temperature);
    if (!(o.sampling.top_p > 0 && o.sampling.top_p <= 1))
      fail("--top-p: expected a value in (0, 1], got {}", o.sampling.top_p);
  }
}

Generation generate(const CausalLM& m, std::span<const std::int32_t> prompt, const GenerateOptions& o,
                    const std::function<void(const GenerationStep&)>& on_step) {
  check_generate_options(o);
  if (prompt.empty()) fail("prompt: expected at least one token, got none");
  const std::size_t V = m.vocab_size();
  for (std::size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || static_cast<std::size_t>(prompt[i]) >= V)
      fail("prompt: token {}: expected an id in [0, {}), got {}", i, V, prompt[i]);
  Generation g;
  g.prompt.assign(prompt.begin(), prompt.end());
  auto st = m.new_state();
  // Prefill all but the last prompt token, then decode: the path record --model takes for an answer
  // segment, so both see the same bits. No prompt logits are needed: the empty sink lets the model skip
  // its LM head.
  if (prompt.size() > 1) m.prefill(*st, prompt.first(prompt.size() - 1), LogitsSink{});
  std::vector<float> row = m.decode(*st, prompt.back());
  const std::size_t n_ids = o.vocab_limit ? std::min(o.vocab_limit, V) : V;
  SplitMix64 rng(o.sampling.seed);
  for (std::int64_t step = 0;; ++step) {
    const std::span<const float> logits = std::span<const float>(row).first(n_ids);
    GenerationStep s;
    s.token = sample_token(logits, o.sampling, rng);
    s.top1 = argmax(logits);
    s.top2 = s.top1 == 0 ? 1 : 0;
    for (std::size_t i = 0; i < n_ids; ++i)
      if (static_cast<std::int32_t>(i) != s.top1 && logits[i] > logits[s.top2])
        s.top2 = static_cast<std::int32_t>(i);
    if (n_ids < 2) s.top2 = s.top1;
    s.margin = logits[s.top1] - logits[s.top2];
    double z = 0;
    for (float x : logits) z += std::exp(static_cast<double>(x) - logits[s.top1]);
    s.logprob = static_cast<double>(logits[s.token]) - logits[s.top1] - std::log(z);
    g.tokens.push_back(s.token);
    g.steps.push_back(s);
    if (on_step) on_step(s);
    if (std::find(o.stop_ids.begin(), o.stop_ids.end(), s.token) != o.stop_ids.end()) {
      g.stop_reason = "stop_token";
      break;
    }
    if (step + 1 >= o.max_tokens) {
      g.stop_reason = "max_tokens";
      break;
    }
    row = m.decode(*st, s.token);
  }
  return g;
}

std::optional<std::size_t> first_divergence(const Generation& a, const Generation& b) {
  const std::size_t n = std::min(a.tokens.size(), b.tokens.size());
  for (std::size_t i = 0; i < n; ++i)
    if (a.tokens[i] != b.tokens[i]) return i;
  return std::nullopt;
}

std::vector<std::int32_t> encode_prompt(const Tokenizer& tok, const std::string& text, bool chat,
                                        const std::string& system) {
  std::vector<std::int32_t> ids;
  if (tok.add_bos() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  auto add = [&](std::string_view s, bool special) {
    auto v = tok.encode(s, special);
    ids.insert(ids.end(), v.begin(), v.end());
  };
  if (!chat) {
    add(text, false);
    return ids;
  }
  for (const char* t : {"<|im_start|>", "<|im_end|>"})
    if (!tok.token_id(t))
      fail("{}: --chat: expected a ChatML tokenizer with the token {}, got a vocabulary without it",
           tok.origin(), t);
  if (!system.empty()) {
    add("<|im_start|>system\n", true);
    add(system, false);
    add("<|im_end|>\n", true);
  }
  add("<|im_start|>user\n", true);
  add(text, false);
  add("<|im_end|>\n<|im_start|>assistant\n", true);
  return ids;
}

std::vector<std::int32_t> default_stop_ids(const Tokenizer& tok, bool chat) {
  std::vector<std::int32_t> s;
  if (tok.eos_id() >= 0) s.push_back(tok.eos_id());
  if (chat)
    if (auto e = tok.token_id("<|im_end|>"); e && std::find(s.begin(), s.end(), *e) == s.end())
      s.push_back(*e);
  return s;
}

std::vector<PromptLine> read_prompts(const std::string& path) {
  std::istringstream f(read_text_file(path, kDataTextCap, "a prompts file"));
  std::vector<PromptLine> out;
  std::string line;
  std::int64_t no = 0, offset = 0;
  while (std::getline(f, line)) {
    ++no;
    const std::int64_t at = offset;
    offset += static_cast<std::int64_t>(line.size()) + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    std::string text = line;
    if (line[b] == '{') {
      json j;
      try {
        j = json::parse(line);
      } catch (const json::exception&) {
        throw_input_error(path, fmt::format("line {}", no), "a JSON object {\"prompt\": \"…\"}",
                          "invalid JSON");
      }
      if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
        throw_input_error(path, fmt::format("line {}: prompt", no), "a string field \"prompt\"",
                          j.is_object() ? "no such string field" : j.type_name());
      text = j["prompt"].get<std::string>();
      if (text.empty())
        throw_input_error(path, fmt::format("line {}: prompt", no), "a non-empty prompt", "\"\"");
    }
    out.push_back({std::move(text), no, at});
  }
  if (out.empty()) throw_input_error(path, "prompts", "at least one non-blank line", "none");
  return out;
}

Corpus build_answer_corpus(const CausalLM& m, const Tokenizer& tok, const std::vector<PromptLine>& prompts,
                           const AnswerCorpusOptions& o,
                           const std::function<void(std::size_t, std::size_t)>& progress) {
  GenerateOptions g = o.gen;
  if (g.stop_ids.empty()) g.stop_ids = default_stop_ids(tok, o.chat);
  g.vocab_limit = tok.vocab_size();
  check_generate_options(g);
  Corpus c;
  c.tokenizer_id = tokenizer_identity(tok);
  c.tokenizer_origin = o.tokenizer_origin;
  c.vocab = static_cast<std::int64_t>(tok.vocab_size());
  c.preset = "answers";
  c.seed = g.sampling.seed;
  std::int64_t stopped = 0;
  for (std::size_t k = 0; k < prompts.size(); ++k) {
    const PromptLine& p = prompts[k];
    std::vector<std::int32_t> ids;
    try {
      ids = encode_prompt(tok, p.text, o.chat, o.system);
      if (ids.size() < 2)
        fail("expected at least 2 tokens (use --chat or a longer prompt), got {}", ids.size());
    } catch (const Error& e) {
      fail("{}: line {}: prompt: {}", o.prompts_path, p.line, e.what());
    }
    // Each prompt draws from its own stream (seed, k), so answers do not depend on the ones before.
    GenerateOptions gk = g;
    gk.sampling.seed = SplitMix64(g.sampling.seed ^ (0xA24BAED4963EE407ull * (k + 1))).next();
    Generation gen = generate(m, ids, gk);
    stopped += gen.stop_reason == "stop_token";
    CorpusSegment s = answer_segment(tok, ids, gen.tokens);
    s.name = fmt::format("answer-{}", k);
    s.source = fmt::format("{}:{}", o.prompts_path, p.line);
    s.byte_offset = p.byte_offset;
    s.token_begin = static_cast<std::int64_t>(c.tokens.size());
    c.tokens.insert(c.tokens.end(), ids.begin(), ids.end());
    c.tokens.insert(c.tokens.end(), gen.tokens.begin(), gen.tokens.end());
    c.segments.push_back(std::move(s));
    if (progress) progress(k + 1, prompts.size());
  }
  json gj{{"model", o.model_path},
          {"model_identity", o.model_identity},
          {"engine", "kerncheck-f32"},
          {"prompts", o.prompts_path},
          {"chat", o.chat},
          {"system", o.chat ? o.system : std::string()},
          {"greedy", g.sampling.greedy},
          {"temperature", g.sampling.greedy ? 0.0 : g.sampling.temperature},
          {"top_p", g.sampling.greedy ? 1.0 : g.sampling.top_p},
          {"seed", g.sampling.seed},
          {"per_prompt_seed", "splitmix64(seed ^ 0xA24BAED4963EE407 * (k + 1))"},
          {"max_tokens", g.max_tokens},
          {"stop_ids", g.stop_ids},
          {"answers_stopped", stopped}};
  c.generation = gj.dump();
  return c;
}

}  // namespace kc
