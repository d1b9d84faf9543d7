// kerncheck generate: text from a reference-engine model (docs/generate.md).
//   generate --model M (--prompt FILE | --text S | --ids 1,2,3) [--chat [--system S]] [--max-tokens N]
//            [--greedy | --temperature T [--top-p P] [--seed S]] [--variant V] [--against V2] [--json F]
// With --against: greedy under --variant (the reference) and under V2 from the same prompt; reports the
// first position where they part and the reference's top-1 − top-2 logit margin there.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "golden/corpus.h"
#include "lab/generate.h"
#include "lab/record_model.h"
#include "model/variant.h"
#include "core/text_safe.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<std::int32_t> parse_ids(const std::string& s) {
  std::vector<std::int32_t> ids;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ',')) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != t.size() || v < 0 || v > INT32_MAX)
      kc::fail("--ids: expected comma-separated token ids, got \"{}\"", s);
    ids.push_back(static_cast<std::int32_t>(v));
  }
  if (ids.empty()) kc::fail("--ids: expected at least one token id, got \"{}\"", s);
  return ids;
}

std::string read_text(const std::string& path) {
  return kc::read_text_file(path, kc::kDataTextCap, "a --prompt file");
}

// The tokenizer: --tokenizer, else the model's own (GGUF metadata or the folder's tokenizer.json); none
// when ids are given and the model has no tokenizer.
std::optional<kc::Tokenizer> find_tokenizer(const std::string& model, const std::string& tokenizer,
                                            bool need) {
  if (!tokenizer.empty()) return kc::load_tokenizer(tokenizer);
  std::error_code ec;
  if (fs::is_directory(model, ec) && !fs::exists(fs::path(model) / "tokenizer.json", ec)) {
    if (need)
      kc::throw_input_error(model, "tokenizer",
                            "a checkpoint folder with tokenizer.json (or --tokenizer FILE)", "none found");
    return std::nullopt;
  }
  return kc::load_tokenizer(model);
}

std::string text_of(const std::optional<kc::Tokenizer>& tok, const std::vector<std::int32_t>& ids) {
  return tok ? tok->decode(ids) : std::string();
}

json generation_json(const kc::Generation& g, const std::optional<kc::Tokenizer>& tok) {
  json steps = json::array();
  for (auto& s : g.steps)
    steps.push_back({{"token", s.token},
                     {"top1", s.top1},
                     {"top2", s.top2},
                     {"margin", s.margin},
                     {"logprob", s.logprob}});
  json j{{"tokens", g.tokens}, {"stop_reason", g.stop_reason}, {"steps", steps}};
  if (tok) j["text"] = tok->decode(g.tokens);
  return j;
}

std::unique_ptr<kc::CausalLM> load_with_variant(const std::string& path, const kc::Variant& v,
                                                std::shared_ptr<kc::VariantUsage>& usage) {
  auto m = kc::load_causal_lm(path);
  usage = kc::apply_variant(*m, v);
  return m;
}

int run(int argc, char** argv) {
  CLI::App app{
      "Generate text with kerncheck's f32 engine (greedy or sampled), optionally under a precision "
      "variant, or find where two variants' greedy outputs part (--against)."};
  app.name(argv[0]);
  std::string model, prompt_file, text, ids_s, tokenizer, system = kc::kDefaultSystemPrompt, variant = "f32",
                                                          against, json_out;
  bool chat = false, greedy = false, ignore_eos = false;
  kc::GenerateOptions o;
  app.add_option("--model", model, "a .gguf or an HF checkpoint folder")
      ->required()
      ->check(CLI::ExistingPath);
  auto* p_prompt =
      app.add_option("--prompt", prompt_file, "prompt text file (used as is, trailing newline kept)")
          ->check(CLI::ExistingFile);
  auto* p_text = app.add_option("--text", text, "prompt text");
  auto* p_ids = app.add_option("--ids", ids_s, "prompt as comma-separated token ids (no tokenizer needed)");
  p_prompt->excludes(p_text, p_ids);
  p_text->excludes(p_ids);
  app.add_flag("--chat", chat,
               "wrap the prompt in SmolLM2-Instruct's ChatML: system turn, user turn, assistant header");
  app.add_option("--system", system, "system prompt of --chat (\"\" omits the system turn)")
      ->capture_default_str();
  app.add_option("--tokenizer", tokenizer,
                 "tokenizer (.gguf, tokenizer.json or folder; default: the model's)")
      ->check(CLI::ExistingPath);
  app.add_option("--max-tokens", o.max_tokens, "stop after this many generated tokens")
      ->capture_default_str();
  auto* p_greedy =
      app.add_flag("--greedy", greedy, "argmax decoding (the default unless --temperature is given)");
  auto* p_temp = app.add_option("--temperature", o.sampling.temperature, "sample at this temperature (> 0)");
  auto* p_top =
      app.add_option("--top-p", o.sampling.top_p, "nucleus: sample from the smallest set of mass ≥ P")
          ->capture_default_str();
  auto* p_seed =
      app.add_option("--seed", o.sampling.seed, "seed of the SplitMix64 sampler")->capture_default_str();
  p_greedy->excludes(p_temp, p_top, p_seed);
  app.add_flag("--ignore-eos", ignore_eos, "do not stop at EOS / <|im_end|>: always generate --max-tokens");
  app.add_option("--variant", variant, "precision variant of the engine (docs/lab.md), e.g. bf16+p=f16")
      ->capture_default_str();
  app.add_option(
      "--against", against,
      "second variant: greedy under both, report the first diverging position and the margin there");
  app.add_option("--json", json_out, "write tokens, text, per-step top-1/top-2/margin/logprob as JSON");
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;

  o.sampling.greedy = p_temp->count() == 0 || o.sampling.temperature == 0;
  if (o.sampling.greedy && (p_top->count() || p_seed->count()))
    kc::fail("--top-p/--seed: expected with --temperature T > 0 (sampling), got greedy decoding");
  if (!against.empty() && !o.sampling.greedy)
    kc::fail("--against: expected greedy decoding (it compares greedy outputs; drop --temperature/--top-p/--seed), got "
             "sampling");
  if (prompt_file.empty() && !p_text->count() && ids_s.empty())
    kc::fail("prompt: expected --prompt FILE, --text S or --ids LIST, got none");
  kc::check_generate_options(o);
  const kc::Variant v_ref = kc::parse_variant(variant, "--variant");
  std::optional<kc::Variant> v_other;
  if (!against.empty()) v_other = kc::parse_variant(against, "--against");

  const bool have_ids = !ids_s.empty();
  std::optional<kc::Tokenizer> tok = find_tokenizer(model, tokenizer, !have_ids);
  std::vector<std::int32_t> prompt;
  if (have_ids) {
    if (chat) kc::fail("--chat: expected a text prompt (--prompt/--text), got --ids");
    prompt = parse_ids(ids_s);
  } else {
    prompt = kc::encode_prompt(*tok, prompt_file.empty() ? text : read_text(prompt_file), chat, system);
  }
  if (!ignore_eos && tok) o.stop_ids = kc::default_stop_ids(*tok, chat);

  std::shared_ptr<kc::VariantUsage> usage;
  auto m = load_with_variant(model, v_ref, usage);
  if (tok) {
    kc::check_vocab_size(*tok, m->vocab_size(), model, fs::is_directory(model));
    o.vocab_limit = tok->vocab_size();
  }
  const bool tty = isatty(1);
  std::size_t printed = 0;
  std::vector<std::int32_t> so_far;
  // On a terminal the text streams as it is made (whole UTF-8 characters); otherwise (pipes, files) it is
  // printed once at the end, invalid UTF-8 → U+FFFD. Special tokens (<|im_end|>) are not printed; the
  // JSON's "text" keeps them.
  auto stream = [&](const kc::GenerationStep& s) {
    if (!tok || v_other || !tty) return;
    so_far.push_back(s.token);
    std::string t = tok->decode_bytes(so_far, /*skip_special=*/true);
    std::size_t end = t.size();
    while (end > printed && (static_cast<unsigned char>(t[end - 1]) & 0xC0) == 0x80) --end;
    if (end > printed && static_cast<unsigned char>(t[end - 1]) >= 0xC0) --end;
    std::fwrite(t.data() + printed, 1, end - printed, stdout);
    std::fflush(stdout);
    printed = end;
  };
  kc::Generation g = kc::generate(*m, prompt, o, stream);
  usage->check("--variant");
  json j{{"model", model},
         {"model_identity", kc::model_identity(model)},
         {"variant", kc::to_string(v_ref)},
         {"prompt_ids", prompt},
         {"prompt_text", text_of(tok, prompt)},
         {"sampling",
          {{"greedy", o.sampling.greedy},
           {"temperature", o.sampling.greedy ? 0.0 : o.sampling.temperature},
           {"top_p", o.sampling.greedy ? 1.0 : o.sampling.top_p},
           {"seed", o.sampling.seed}}},
         {"max_tokens", o.max_tokens},
         {"stop_ids", o.stop_ids}};
  if (chat) j["chat"] = {{"template", "chatml"}, {"system", system}};
  if (!v_other) {
    if (tok) {
      if (tty) {
        const std::string raw =
            tok->decode_bytes(g.tokens, true);  // what the stream held back (a cut character)
        std::fwrite(raw.data() + printed, 1, raw.size() - printed, stdout);
      } else {
        const std::string t = tok->decode(g.tokens, /*skip_special=*/true);
        std::fwrite(t.data(), 1, t.size(), stdout);
      }
      std::fputc('\n', stdout);
    } else {
      for (std::size_t i = 0; i < g.tokens.size(); ++i) kc::printf_safe(stdout, "%s%d", i ? "," : "", g.tokens[i]);
      kc::printf_safe(stdout, "\n");
    }
    kc::printf_safe(stderr, "generated %zu tokens (%s), prompt %zu tokens, variant %s\n", g.tokens.size(),
                 g.stop_reason.c_str(), prompt.size(), kc::to_string(v_ref).c_str());
    j["generation"] = generation_json(g, tok);
  } else {
    std::shared_ptr<kc::VariantUsage> usage2;
    auto m2 = load_with_variant(model, *v_other, usage2);
    kc::Generation g2 = kc::generate(*m2, prompt, o);
    usage2->check("--against");
    auto d = kc::first_divergence(g, g2);
    std::vector<float> margins;
    for (auto& s : g.steps) margins.push_back(s.margin);
    j["reference"] = generation_json(g, tok);
    j["against"] = generation_json(g2, tok);
    j["against"]["variant"] = kc::to_string(*v_other);
    kc::printf_safe(stdout, "reference %s vs %s, greedy, %zu / %zu tokens\n", kc::to_string(v_ref).c_str(),
                kc::to_string(*v_other).c_str(), g.tokens.size(), g2.tokens.size());
    if (!d) {
      kc::printf_safe(stdout, "no divergence over %zu common tokens\n", std::min(g.tokens.size(), g2.tokens.size()));
      j["divergence"] = nullptr;
    } else {
      const auto& s = g.steps[*d];
      // How near a tie: the share of the reference's steps with a smaller margin.
      std::size_t below =
          std::count_if(margins.begin(), margins.end(), [&](float x) { return x < s.margin; });
      kc::printf_safe(stdout, 
          "first divergence at generated token %zu: reference %d, %s %d; reference top-1 − top-2 "
          "margin there %.6g (smaller at %zu of %zu steps; median margin %.4g)\n",
          *d, g.tokens[*d], kc::to_string(*v_other).c_str(), g2.tokens[*d], s.margin, below, margins.size(),
          [&] {
            auto c = margins;
            std::nth_element(c.begin(), c.begin() + c.size() / 2, c.end());
            return static_cast<double>(c[c.size() / 2]);
          }());
      if (tok)
        kc::printf_safe(stdout, "common prefix: %s\n",
                    tok->decode(std::vector<std::int32_t>(g.tokens.begin(), g.tokens.begin() + *d)).c_str());
      j["divergence"] = {{"index", *d},
                         {"reference_token", g.tokens[*d]},
                         {"against_token", g2.tokens[*d]},
                         {"reference_margin", s.margin},
                         {"reference_top1", s.top1},
                         {"reference_top2", s.top2},
                         {"steps_with_smaller_margin", below}};
    }
  }
  if (!json_out.empty()) kc::write_file_atomic(json_out, j.dump(1) + "\n");
  return 0;
}

kc::cli::Registrar reg({"generate",
                        "generate text with the f32 engine (greedy/sampled, variants, divergence)", run});

}  // namespace
