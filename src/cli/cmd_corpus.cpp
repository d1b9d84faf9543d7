// kerncheck corpus: build an evaluation corpus (docs/corpus.md) or show one.
//   corpus build --tokenizer MODEL_OR_TOKENIZER_JSON [--preset quick|full] [--depths 1024,2048]
//                [--segments-per-depth 4] [--decode-last 512] [--prose FILE]… [--code FILE]… -o corpus.kcc
//   corpus show FILE
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "eval/corpus.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Build an evaluation corpus (token windows at several depths) or show one."};
  app.name(argv[0]);
  app.require_subcommand(1);
  kc::CorpusOptions o;
  std::string tokenizer, out, depths, show_path;
  auto* build = app.add_subcommand("build", "cut segments from prose and code and tokenize them");
  build->add_option("--tokenizer", tokenizer, "a .gguf (tokenizer metadata), tokenizer.json or a folder with one")
      ->required()
      ->check(CLI::ExistingPath);
  build->add_option("--preset", o.preset, "quick (depths 256,512; decode-last 64) or full (1k-8k; 512)")
      ->capture_default_str();
  build->add_option("--depths", depths, "comma-separated context depths (default: the preset's)");
  build->add_option("--segments-per-depth", o.segments_per_depth,
                    "segments at each depth, alternating prose and code (default 4)");
  build->add_option("--decode-last", o.decode_last,
                    "final positions of each segment scored in decode phase (default: the preset's)");
  build->add_option("--prose", o.prose_files, "prose source file (repeatable; default: KJV + Devil's Dictionary)")
      ->check(CLI::ExistingFile);
  build->add_option("--code", o.code_files, "code source file (repeatable; default: Python stdlib + C headers)")
      ->check(CLI::ExistingFile);
  build->add_option("--seed", o.seed, "seed of the window choice")->capture_default_str();
  build->add_option("-o,--output", out, "output corpus file (.kcc, safetensors)")->required();
  auto* show = app.add_subcommand("show", "print a corpus file's summary");
  show->add_option("file", show_path, "corpus file")->required()->check(CLI::ExistingFile);
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;

  if (build->parsed()) {
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
    kc::resolve_corpus_options(o);
    kc::Tokenizer tok = kc::load_tokenizer(tokenizer);
    std::vector<kc::SourceDoc> docs = o.prose_files.empty() && o.code_files.empty()
                                          ? kc::default_sources()
                                          : kc::read_sources(o.prose_files, o.code_files);
    kc::Corpus c = kc::build_corpus(o, docs, tok, tokenizer);
    kc::write_corpus(out, c);
    std::printf("wrote corpus %s: %zu segments, %lld scored positions, %zu tokens, tokenizer %s, checksum %s\n",
                out.c_str(), c.segments.size(), static_cast<long long>(c.positions()), c.tokens.size(),
                c.tokenizer_id.c_str(), c.checksum.c_str());
    return 0;
  }
  kc::Corpus c = kc::read_corpus(show_path);
  std::printf("corpus %s\n  preset %s, seed %llu, vocab %lld\n  tokenizer %s (%s)\n  checksum %s\n",
              show_path.c_str(), c.preset.c_str(), static_cast<unsigned long long>(c.seed),
              static_cast<long long>(c.vocab), c.tokenizer_id.c_str(), c.tokenizer_origin.c_str(),
              c.checksum.c_str());
  std::printf("  %zu segments, %lld scored positions\n", c.segments.size(), static_cast<long long>(c.positions()));
  std::printf("  %-20s %-6s %7s %7s  %s\n", "name", "domain", "depth", "decode", "source @ byte offset: text");
  for (auto& s : c.segments) {
    std::string head = s.text.substr(0, 48);
    for (auto& ch : head)
      if (ch == '\n' || ch == '\t' || ch == '\r') ch = ' ';
    while (!head.empty() && (static_cast<unsigned char>(head.back()) & 0xC0) == 0x80) head.pop_back();
    if (!head.empty() && static_cast<unsigned char>(head.back()) >= 0xC0) head.pop_back();
    std::printf("  %-20s %-6s %7lld %7lld  %s @ %lld: %s…\n", s.name.c_str(), s.domain.c_str(),
                static_cast<long long>(s.depth), static_cast<long long>(s.decode_last), s.source.c_str(),
                static_cast<long long>(s.byte_offset), head.c_str());
  }
  return 0;
}

kc::cli::Registrar reg({"corpus", "build an evaluation corpus from prose and code, or show one", run});

}  // namespace
