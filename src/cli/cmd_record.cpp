// kerncheck record: make a golden or a candidate file. Modes (one per source; more come with the engine):
//   --from-logits LOGITS --tokens IDS [--segments FILE] [-k 20] -o GOLDEN
//   --from-logits LOGITS --golden GOLDEN [--positions A:B] -o CANDIDATE
#include <charconv>

#include "cli/command.h"
#include "core/error.h"
#include "eval/golden.h"
#include "eval/record_logits.h"

namespace {

std::string join_args(int argc, char** argv) {
  std::string s = "kerncheck record";
  for (int i = 1; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

std::pair<std::int64_t, std::int64_t> parse_range(const std::string& s) {
  auto colon = s.find(':');
  std::int64_t a = 0, b = 0;
  auto ok = [](const std::string& t, std::int64_t& v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size() && !t.empty();
  };
  if (colon == std::string::npos || !ok(s.substr(0, colon), a) || !ok(s.substr(colon + 1), b) || a < 0 ||
      b <= a)
    kc::fail("--positions: expected A:B with 0 ≤ A < B, got \"{}\"", s);
  return {a, b};
}

struct RecordArgs {
  std::string from_logits, tokens, segments, golden, out, positions;
  int k = 20;
  std::string model_id, tokenizer_id, corpus_id, engine = "logits", variant;
};

int record_golden_from_logits(const RecordArgs& a, const std::string& cmdline) {
  kc::Logits L = kc::open_logits(a.from_logits);
  std::vector<std::int32_t> next = kc::read_next_tokens(a.tokens, L.n, L.vocab);
  kc::CorpusLayout layout = kc::read_layout(a.segments, L.n);
  kc::GoldenBuffers g = kc::record_golden(L, next, layout, a.k);
  kc::GoldenMeta m;
  m.k = a.k;
  m.vocab = L.vocab;
  m.n = L.n;
  m.identity = {a.model_id, a.tokenizer_id,
                a.corpus_id.empty() ? kc::corpus_identity_of_tokens(next) : a.corpus_id};
  m.made_by = {a.engine, a.variant, cmdline};
  m.segments = layout.segments;
  std::string sum = kc::write_golden(a.out, m, g.view());
  std::printf("wrote golden %s: %lld positions, k = %d, vocab %lld, %.1f bytes/position, checksum %s\n",
              a.out.c_str(), static_cast<long long>(L.n), a.k, static_cast<long long>(L.vocab),
              4.0 * (2 * a.k + 5) + 2, sum.c_str());
  return 0;
}

int record_candidate_from_logits(const RecordArgs& a, const std::string& cmdline) {
  kc::Golden g = kc::read_golden(a.golden);
  kc::Logits L = kc::open_logits(a.from_logits);
  std::int64_t b = 0, e = g.meta.n;
  if (!a.positions.empty()) std::tie(b, e) = parse_range(a.positions);
  if (e > g.meta.n) kc::fail("--positions: the golden has {} positions, got {}:{}", g.meta.n, b, e);
  kc::CandidateBuffers c = kc::record_candidate(L, g, b, e);
  kc::CandidateMeta m = kc::candidate_meta_for(g, {a.engine, a.variant, cmdline});
  m.n = e - b;
  m.position_begin = b;
  std::string sum = kc::write_candidate(a.out, m, c.view());
  std::printf("wrote candidate %s: positions [%lld, %lld) of %s, checksum %s\n", a.out.c_str(),
              static_cast<long long>(b), static_cast<long long>(e), a.golden.c_str(), sum.c_str());
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{
      "Record a golden (reference top-k distributions) or a candidate (log-probs at a golden's ids)."};
  app.name(argv[0]);
  RecordArgs a;
  app.add_option("--from-logits", a.from_logits,
                 "full logits [N, vocab] (.npy or .safetensors; f32, bf16, f16)")
      ->check(CLI::ExistingFile);
  app.add_option("--tokens", a.tokens, "golden mode: token ids, [N] next tokens or [N+1] the whole sequence")
      ->check(CLI::ExistingFile);
  app.add_option("--segments", a.segments, "golden mode: segments JSON (name, domain, depth, start, phase…)")
      ->check(CLI::ExistingFile);
  app.add_option("-k", a.k, "golden mode: top-k ids kept per position")->capture_default_str();
  app.add_option("--golden", a.golden, "candidate mode: the golden the candidate is judged against")
      ->check(CLI::ExistingFile);
  app.add_option("--positions", a.positions,
                 "candidate mode: golden positions A:B the logits rows hold (shards)");
  app.add_option("-o,--output", a.out, "output file (.safetensors)")->required();
  app.add_option("--model-id", a.model_id, "golden mode: model identity (hash string)");
  app.add_option("--tokenizer-id", a.tokenizer_id, "golden mode: tokenizer identity (hash string)");
  app.add_option("--corpus-id", a.corpus_id,
                 "golden mode: corpus identity (default: sha256 of the token ids)");
  app.add_option("--engine", a.engine, "what produced the logits")->capture_default_str();
  app.add_option("--variant", a.variant, "variant name (precision setting, kernel …)");
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  const std::string cmdline = join_args(argc, argv);
  if (a.from_logits.empty())
    kc::fail("expected a source: --from-logits LOGITS (see kerncheck record --help)");
  if (!a.golden.empty()) {
    if (!a.tokens.empty() || !a.segments.empty())
      kc::fail(
          "--golden (candidate mode) takes the tokens and segments from the golden; drop "
          "--tokens/--segments");
    return record_candidate_from_logits(a, cmdline);
  }
  if (a.tokens.empty())
    kc::fail("golden mode needs --tokens IDS (or give --golden GOLDEN to record a candidate)");
  if (!a.positions.empty()) kc::fail("--positions applies to candidates (with --golden)");
  return record_golden_from_logits(a, cmdline);
}

kc::cli::Registrar reg({"record", "record a golden or a candidate from full logits", run});

}  // namespace
