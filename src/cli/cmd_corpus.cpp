// kerncheck corpus: build an evaluation corpus (docs/corpus.md) or show one.
//   corpus build --tokenizer MODEL_OR_TOKENIZER_JSON [--preset quick|full|deep] [--depths 1024,2048]
//                [--segments-per-depth 4] [--decode-last 512] [--prose FILE]… [--code FILE]… -o corpus.kcorpus
//   corpus build --answers PROMPTS.txt --model M [--chat] [--greedy | --temperature T --top-p P] [--seed S]
//                [--max-tokens N] -o answers.kcorpus      (a corpus of the model's own answers; docs/corpus.md)
//   corpus show FILE
//   corpus prompts GOLDEN_OR_CORPUS [--jsonl]   each segment's token ids, for driving an engine yourself
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "golden/corpus.h"
#include "golden/golden.h"
#include "golden/record_topk.h"
#include "io/safetensors.h"
#include "lab/generate.h"
#include "lab/record_model.h"
#include "core/text_safe.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "Build an evaluation corpus (token windows at several depths, or a model's answers to prompts) or show "
      "one."};
  app.name(argv[0]);
  app.require_subcommand(1);
  kc::CorpusOptions o;
  std::string tokenizer, out, depths, show_path;
  auto* build = app.add_subcommand("build", "cut segments from prose and code and tokenize them");
  build
      ->add_option(
          "--tokenizer", tokenizer,
          "a .gguf (tokenizer metadata), tokenizer.json or a folder with one (--answers: default the "
          "model's)")
      ->check(CLI::ExistingPath);
  build->add_option("--preset", o.preset,
                    "quick (depths 256,512; decode-last 64), full (1k-8k; 512) or deep (8192 × 2; 32)")
      ->capture_default_str();
  build->add_option("--depths", depths, "comma-separated context depths (default: the preset's)");
  std::int64_t segments_per_depth = 0, decode_last = 0;  // into o only when given (0 is a value)
  build->add_option("--segments-per-depth", segments_per_depth,
                    "segments at each depth, alternating prose and code (default 4)");
  build->add_option("--decode-last", decode_last,
                    "final positions of each segment scored in decode phase (default: the preset's)");
  build
      ->add_option("--prose", o.prose_files,
                   "prose source file (repeatable; default: KJV + Devil's Dictionary)")
      ->check(CLI::ExistingFile);
  build
      ->add_option("--code", o.code_files,
                   "code source file (repeatable; default: the pinned Python stdlib and C headers of data/corpus)")
      ->check(CLI::ExistingFile);
  build->add_option("--seed", o.seed, "seed of the window choice")->capture_default_str();
  build->add_option("-o,--output", out, "output corpus file (.kcorpus by convention; safetensors)")->required();
  // Answer corpora: the f32 reference model answers each prompt; prompt + answer is one segment.
  std::string answers, model;
  kc::AnswerCorpusOptions ao;
  ao.gen.max_tokens = 256;
  bool greedy = false;
  build
      ->add_option("--answers", answers,
                   "prompts file (one per line, or JSON Lines {\"prompt\": …}): build a "
                   "corpus of the model's own answers")
      ->check(CLI::ExistingFile);
  build->add_option("--model", model, "--answers: the model that answers (.gguf or HF folder), run in f32")
      ->check(CLI::ExistingPath);
  build->add_flag("--chat", ao.chat, "--answers: wrap each prompt in ChatML (SmolLM2-Instruct's template)");
  build->add_option("--system", ao.system, "--answers --chat: system prompt (\"\" omits the system turn)")
      ->capture_default_str();
  auto* p_greedy = build->add_flag("--greedy", greedy, "--answers: argmax answers instead of sampled ones");
  auto* p_temp =
      build
          ->add_option("--temperature", ao.gen.sampling.temperature,
                       "--answers: sampling temperature (default 1: the distribution the judge scores)")
          ->capture_default_str();
  auto* p_top = build->add_option("--top-p", ao.gen.sampling.top_p, "--answers: nucleus sampling mass")
                    ->capture_default_str();
  p_greedy->excludes(p_temp, p_top);
  build
      ->add_option("--max-tokens", ao.gen.max_tokens, "--answers: answer length limit (stops earlier at EOS)")
      ->capture_default_str();
  auto* show = app.add_subcommand("show", "print a corpus file's summary");
  show->add_option("file", show_path, "corpus file")->required()->check(CLI::ExistingFile);
  std::string prompts_path;
  bool jsonl = false;
  auto* prompts = app.add_subcommand(
      "prompts",
      "print each segment's prompt as token ids (t_0 … t_depth; one engine request per segment, in order): a "
      "JSON list of lists, or JSON Lines with --jsonl (docs/engines.md)");
  prompts->add_option("file", prompts_path, "a golden or a corpus")->required()->check(CLI::ExistingFile);
  prompts->add_flag("--jsonl", jsonl,
                    "one {\"segment\", \"name\", \"prompt_token_ids\"} object per line instead of one JSON list");
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;

  if (prompts->parsed()) {
    std::vector<std::pair<std::string, std::vector<std::int32_t>>> rows;  // name, tokens
    std::string format;
    {
      kc::SafetensorsFile file = kc::SafetensorsFile::open(prompts_path);
      auto f = file.metadata().find("kerncheck.format");
      if (f != file.metadata().end()) format = f->second;
    }
    if (format == "golden") {
      kc::Golden g = kc::read_golden(prompts_path);
      std::vector<kc::GoldenWindow> ws = kc::golden_windows(g);
      for (std::size_t i = 0; i < ws.size(); ++i) rows.push_back({g.meta.segments[i].name, ws[i].tokens});
    } else {
      kc::Corpus c = kc::read_corpus(prompts_path);  // refuses anything else, naming the file
      for (auto& s : c.segments) {
        auto w = c.window(s);
        rows.push_back({s.name, {w.begin(), w.end()}});
      }
    }
    if (!jsonl) std::fputs("[", stdout);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      nlohmann::json ids = rows[i].second;
      if (jsonl)
        std::printf("%s\n", nlohmann::json{{"segment", i}, {"name", rows[i].first}, {"prompt_token_ids", ids}}
                                .dump()
                                .c_str());
      else
        std::printf("%s%s", i ? ",\n" : "", ids.dump().c_str());
    }
    if (!jsonl) std::fputs("]\n", stdout);
    return 0;
  }
  if (build->parsed() && !answers.empty()) {
    if (model.empty()) kc::fail("--answers: expected --model MODEL (the model that answers), got none");
    for (const char* f :
         {"--preset", "--depths", "--segments-per-depth", "--decode-last", "--prose", "--code"})
      if (build->count(f))
        kc::fail("{}: expected a text corpus (an answer corpus's segments are the prompts; drop it or --answers), "
                 "got --answers",
                 f);
    ao.gen.sampling.greedy = greedy;
    ao.gen.sampling.seed = o.seed;
    ao.prompts_path = answers;
    ao.model_path = model;
    ao.tokenizer_origin = tokenizer.empty() ? model : tokenizer;
    std::vector<kc::PromptLine> prompts = kc::read_prompts(answers);
    kc::Tokenizer tok = kc::load_tokenizer(ao.tokenizer_origin);
    kc::check_generate_options(ao.gen);
    auto m = kc::load_causal_lm(model);
    kc::check_vocab_size(tok, m->vocab_size(), model, std::filesystem::is_directory(model));
    ao.model_identity = kc::model_identity(model);
    const bool tty = isatty(2);
    kc::Corpus c = kc::build_answer_corpus(*m, tok, prompts, ao, [&](std::size_t done, std::size_t total) {
      std::fprintf(stderr, tty ? "\ranswered %zu/%zu prompts" : "answered %zu/%zu prompts\n", done, total);
      if (tty && done == total) std::fputc('\n', stderr);
      std::fflush(stderr);
    });
    kc::write_corpus(out, c);
    std::int64_t answer_tokens = 0;
    for (auto& s : c.segments) answer_tokens += s.decode_last;
    kc::printf_safe(stdout, 
        "wrote answer corpus %s: %zu answers, %lld answer tokens (decode phase), %lld scored positions, "
        "tokenizer %s, checksum %s\n",
        out.c_str(), c.segments.size(), static_cast<long long>(answer_tokens),
        static_cast<long long>(c.positions()), c.tokenizer_id.c_str(), c.checksum.c_str());
    return 0;
  }
  if (build->parsed()) {
    if (tokenizer.empty()) kc::fail("--tokenizer: expected a .gguf, tokenizer.json or folder, got none");
    for (const char* f : {"--model", "--chat", "--greedy", "--temperature", "--top-p", "--max-tokens"})
      if (build->count(f)) kc::fail("{}: expected an answer corpus (--answers PROMPTS), got a text corpus", f);
    const std::string preset = o.preset;
    if (!depths.empty()) {
      std::size_t at = 0;
      while (at <= depths.size()) {
        std::size_t c = depths.find(',', at);
        std::string t = depths.substr(at, c == std::string::npos ? std::string::npos : c - at);
        try {
          std::size_t used = 0;
          o.depths.push_back(std::stoll(t, &used));
          if (used != t.size()) throw std::invalid_argument(t);
        } catch (const std::exception&) {
          kc::fail("--depths: expected comma-separated integers, got \"{}\"", depths);
        }
        if (c == std::string::npos) break;
        at = c + 1;
      }
    }
    if (build->count("--segments-per-depth")) o.segments_per_depth = segments_per_depth;
    if (build->count("--decode-last")) o.decode_last = decode_last;
    kc::resolve_corpus_options(o);
    kc::Tokenizer tok = kc::load_tokenizer(tokenizer);
    std::vector<kc::SourceDoc> docs = o.prose_files.empty() && o.code_files.empty()
                                          ? kc::default_sources()
                                          : kc::read_sources(o.prose_files, o.code_files);
    kc::Corpus c = kc::build_corpus(o, docs, tok, tokenizer);
    kc::write_corpus(out, c);
    kc::printf_safe(stdout, 
        "wrote corpus %s: %zu segments, %lld scored positions, %zu tokens, tokenizer %s, checksum %s, sources "
        "%s\n",
        out.c_str(), c.segments.size(), static_cast<long long>(c.positions()), c.tokens.size(),
        c.tokenizer_id.c_str(), c.checksum.c_str(), c.sources_id.c_str());
    return 0;
  }
  kc::Corpus c = kc::read_corpus(show_path);
  kc::printf_safe(stdout, "corpus %s\n  preset %s, seed %llu, vocab %lld\n  tokenizer %s (%s)\n  checksum %s\n",
              show_path.c_str(), c.preset.c_str(), static_cast<unsigned long long>(c.seed),
              static_cast<long long>(c.vocab), c.tokenizer_id.c_str(), c.tokenizer_origin.c_str(),
              c.checksum.c_str());
  if (!c.sources_id.empty()) kc::printf_safe(stdout, "  sources %s\n", c.sources_id.c_str());
  kc::printf_safe(stdout, "  %zu segments, %lld scored positions\n", c.segments.size(),
              static_cast<long long>(c.positions()));
  if (!c.generation.empty()) kc::printf_safe(stdout, "  generation %s\n", c.generation.c_str());
  kc::printf_safe(stdout, "  %-20s %-6s %7s %7s  %s\n", "name", "domain", "depth", "decode",
              "source @ byte offset: text");
  for (auto& s : c.segments) {
    std::string head = s.text.substr(0, 48);
    for (auto& ch : head)
      if (ch == '\n' || ch == '\t' || ch == '\r') ch = ' ';
    while (!head.empty() && (static_cast<unsigned char>(head.back()) & 0xC0) == 0x80) head.pop_back();
    if (!head.empty() && static_cast<unsigned char>(head.back()) >= 0xC0) head.pop_back();
    kc::printf_safe(stdout, "  %-20s %-6s %7lld %7lld  %s @ %lld: %s…\n", s.name.c_str(), s.domain.c_str(),
                static_cast<long long>(s.depth), static_cast<long long>(s.decode_last), s.source.c_str(),
                static_cast<long long>(s.byte_offset), head.c_str());
  }
  return 0;
}

kc::cli::Registrar reg(
    {"corpus", "build an evaluation corpus (prose and code, or the model's own answers), or show one", run});

}  // namespace
