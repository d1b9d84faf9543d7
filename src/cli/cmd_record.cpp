// kerncheck record: make a golden or a candidate file. Modes (one per source; more come with the engine):
//   --from-logits LOGITS --tokens IDS [--segments FILE] [-k 20] -o GOLDEN
//   --from-logits LOGITS --golden GOLDEN [--positions A:B] -o CANDIDATE
//   --model MODEL --corpus CORPUS [-k 20] -o GOLDEN        (kerncheck's f32 engine; docs/corpus.md)
//   --model MODEL --golden GOLDEN -o CANDIDATE
//   --server URL --api vllm|sglang --corpus CORPUS [-k 20] -o GOLDEN  (a running engine; docs/engines.md)
//   --server URL --api vllm|sglang --golden GOLDEN -o CANDIDATE [--phase prefill|decode|both] [--repeat N]
// With --model, --variant / --round / --prefill-block choose a precision variant of the engine (docs/lab.md).
#include <charconv>

#include "cli/command.h"
#include "cli/judge_flags.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/text_safe.h"
#include "golden/golden.h"
#include "golden/record_logits.h"
#include "lab/record_model.h"
#include "lab/record_server.h"

namespace {

std::string join_args(int argc, char** argv) {
  std::string s = "kerncheck record";
  for (int i = 1; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

struct RecordArgs {
  std::string from_logits, tokens, segments, golden, out, positions;
  int k = 20;
  std::string model_id, tokenizer_id, corpus_id, engine = "logits", variant;
  std::string model, corpus, tokenizer;  // --model mode
  std::vector<std::string> round;        // --model mode: NAME[@LAYER]=BITS, appended as round: terms
  int prefill_block = 0;
  int batch = 0;  // --model mode: segments decoded together (0: the default)
  bool allow_other_model = false;
  std::string logits_out;  // --model candidate mode
  kc::RecordServerOptions server;  // --server mode
};

// --variant plus one round:NAME=BITS term per --round.
std::string variant_spec(const RecordArgs& a) {
  std::string v = a.variant;
  for (const auto& r : a.round) v += (v.empty() ? "round:" : "+round:") + r;
  return v;
}

int record_with_model(const RecordArgs& a, const std::string& cmdline) {
  if (!a.tokens.empty() || !a.segments.empty() || !a.positions.empty() || !a.model_id.empty() ||
      !a.tokenizer_id.empty() || !a.corpus_id.empty())
    kc::fail("--model: expected the tokens, segments and identities from --corpus/--golden, got --tokens, "
             "--segments, --positions or an --*-id flag (drop them)");
  kc::RecordModelOptions o;
  o.model = a.model;
  o.tokenizer = a.tokenizer;
  o.corpus = a.corpus;
  o.golden = a.golden;
  o.out = a.out;
  o.variant = variant_spec(a);
  o.prefill_block = a.prefill_block;
  o.batch = a.batch;
  o.command_line = cmdline;
  o.k = a.k;
  o.allow_other_model = a.allow_other_model;
  o.logits_out = a.logits_out;
  if (!a.logits_out.empty() && a.golden.empty())
    kc::fail("--logits-out: expected candidate mode (--golden GOLDEN), got golden mode (--corpus)");
  if (!a.golden.empty()) {
    if (!a.corpus.empty()) kc::fail("--model: expected --corpus (golden) or --golden (candidate), got both");
    kc::record_candidate_with_model(o);
  } else {
    if (a.corpus.empty()) kc::fail("--model: expected --corpus CORPUS (golden) or --golden GOLDEN (candidate), got neither");
    if (a.allow_other_model) kc::fail("--allow-other-model: expected candidate mode (--golden GOLDEN), got golden mode (--corpus)");
    kc::record_golden_with_model(o);
  }
  return 0;
}

int record_with_server(RecordArgs& a, const std::string& cmdline) {
  if (!a.tokens.empty() || !a.segments.empty() || !a.positions.empty() || !a.tokenizer_id.empty() ||
      !a.corpus_id.empty() || !a.tokenizer.empty() || a.allow_other_model || !a.round.empty() ||
      a.prefill_block != 0 || !a.logits_out.empty() || a.batch != 0)
    kc::fail("--server: expected the tokens and segments from --corpus/--golden alone, got one of --tokens, "
             "--segments, --positions, --tokenizer*, --corpus-id, --allow-other-model, --round, --prefill-block, "
             "--logits-out, --batch (drop it)");
  kc::RecordServerOptions& o = a.server;
  o.corpus = a.corpus;
  o.golden = a.golden;
  o.out = a.out;
  o.k = a.k;
  o.variant = a.variant;
  o.model_id = a.model_id;
  o.command_line = cmdline;
  while (!o.url.empty() && o.url.back() == '/') o.url.pop_back();
  kc::record_with_server(o);
  return 0;
}

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
  kc::print_safe(stdout, fmt::format("wrote golden {}: {} positions, k = {}, vocab {}, {:.1f} bytes/position, "
                                     "checksum {}\n",
                                     a.out, L.n, a.k, L.vocab, 4.0 * (2 * a.k + 5) + 2, sum));
  return 0;
}

int record_candidate_from_logits(const RecordArgs& a, const std::string& cmdline) {
  kc::Golden g = kc::read_golden(a.golden);
  kc::Logits L = kc::open_logits(a.from_logits);
  std::int64_t b = 0, e = g.meta.n;
  if (!a.positions.empty()) std::tie(b, e) = kc::cli::parse_position_range(a.positions);
  if (e > g.meta.n) kc::fail("--positions: expected a range within the golden's {} positions, got {}:{}", g.meta.n, b, e);
  kc::CandidateBuffers c = kc::record_candidate(L, g, b, e);
  kc::CandidateMeta m = kc::candidate_meta_for(g, {a.engine, a.variant, cmdline});
  m.n = e - b;
  m.position_begin = b;
  std::string sum = kc::write_candidate(a.out, m, c.view());
  kc::print_safe(stdout, fmt::format("wrote candidate {}: positions [{}, {}) of {}, checksum {}\n", a.out, b, e,
                                     a.golden, sum));
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
  app.add_option("--variant", a.variant,
                 "with --model: precision variant of the engine, terms joined by '+': f32 (default) | bf16 | "
                 "p=f32|bf16|f16|fp8|fp8x448|fp8x256 | kv=DTYPE | attn=exact|flash | gdn=f32|fla | order=SEED | "
                 "logits=f32|bf16|f16 | bug:NAME[@D]=STRENGTH | round:NAME[@LAYER]=BITS "
                 "(docs/lab.md); with --from-logits: a free label of what made the logits");
  app.add_option("--round", a.round,
                 "with --model, repeatable: keep tensor NAME (hook name, e.g. attn.out, optionally @LAYER) to "
                 "BITS mantissa bits; adds round:NAME=BITS to --variant");
  app.add_option("--prefill-block", a.prefill_block,
                 "with --model: feed each segment's prefill in calls of N tokens (0 = one call); recorded "
                 "in the metadata")
      ->capture_default_str();
  app.add_option("--batch", a.batch,
                 "with --model: segments whose decode steps run together, one GEMM row each (0 = as many as "
                 "fit: up to 32 segments and 16384 positions; 1 = one segment at a time). The file is the same "
                 "for any value")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--model", a.model, "run kerncheck's f32 engine: a .gguf or an HF checkpoint folder")
      ->check(CLI::ExistingPath);
  app.add_option("--corpus", a.corpus, "--model golden mode: the corpus (kerncheck corpus build)")
      ->check(CLI::ExistingFile);
  app.add_option("--tokenizer", a.tokenizer,
                 "--model mode: tokenizer (default: the GGUF's metadata or the folder's tokenizer.json)")
      ->check(CLI::ExistingPath);
  app.add_option("--logits-out", a.logits_out,
                 "--model candidate mode: also write every position's full logits (f32 [N, vocab] .npy, golden "
                 "order; N·vocab·4 bytes) for a full-vocabulary KL outside the judge (bench/zoo.py)");
  app.add_flag("--allow-other-model", a.allow_other_model,
               "--model candidate mode: accept a model that is not the golden's");
  auto& sv = a.server;
  app.add_option("--server", sv.url,
                 "record from a running engine at URL (e.g. http://127.0.0.1:8000): --corpus → golden, --golden → "
                 "candidate (docs/engines.md)");
  app.add_option("--api", sv.api,
                 "--server: the engine's API: vllm (POST /v1/completions) or sglang (native POST /generate); "
                 "llamacpp: not supported yet")
      ->capture_default_str();
  app.add_option("--served-model", sv.served_model,
                 "--server: the request's model name (default: the first of GET /v1/models)");
  app.add_option("--phase", sv.phase,
                 "--server: prefill (every position from prompt log-probs), decode (every position a one-token "
                 "decode step on the cached prefix) or both (the golden's decode positions as decode steps)")
      ->capture_default_str();
  app.add_option("--top-logprobs", sv.top_logprobs,
                 "--server: K' asked of the engine (vLLM caps it at its --max-logprobs; SGLang also returns the "
                 "golden's ids, asked for by name)")
      ->capture_default_str();
  app.add_option("--repeat", sv.repeat,
                 "--server candidate mode: record N times (the engine's own noise runs for kerncheck test "
                 "--noise); N > 1 writes OUT with .1, .2, … before its extension (c.safetensors → "
                 "c.1.safetensors, c.2.safetensors), each with metadata repetition = r, repetitions = N; rerunning the "
                 "same command after a failure keeps the runs already written and resumes the next")
      ->capture_default_str();
  app.add_option("--concurrency", sv.concurrency, "--server: segments in flight")->capture_default_str();
  app.add_option("--timeout", sv.timeout_s,
                 "--server: seconds per request, the whole exchange (a server that trickles its answer is cut off)")
      ->capture_default_str();
  app.add_option("--max-response-mb", sv.max_response_mb,
                 "--server: largest response read, MiB (a larger one is refused, exit 3)")
      ->capture_default_str();
  app.add_option("--prefill-window", sv.prefill_window,
                 "--server --api sglang: prefill depths per request (default 64; 0: the whole segment in one "
                 "request). SGLang lists every id asked for at every position, so a response for a window of W "
                 "holds at most (k+1)·W ids at W positions however deep the segment; each window after the first "
                 "is computed over the prefix SGLang's cache holds. Record a candidate and its floor with the same W");
  app.add_option("--retries", sv.retries,
                 "--server: retries per request after HTTP 5xx/429, network errors and timeouts (back-off "
                 "doubling from 1 s)")
      ->capture_default_str();
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  kc::check_outputs_apart({a.from_logits, a.tokens, a.segments, a.golden, a.model, a.corpus, a.tokenizer},
                          {a.out, a.logits_out});
  const std::string cmdline = join_args(argc, argv);
  if (!sv.url.empty()) {
    if (!a.model.empty() || !a.from_logits.empty())
      kc::fail("--server: expected one source (--server, --model or --from-logits), got more than one");
    return record_with_server(a, cmdline);
  }
  for (const char* f : {"--api", "--served-model", "--phase", "--top-logprobs", "--concurrency", "--timeout",
                        "--retries", "--repeat", "--max-response-mb", "--prefill-window"})
    if (app.count(f)) kc::fail("{}: expected only with --server URL, got it without", f);
  if (!a.model.empty()) {
    if (!a.from_logits.empty()) kc::fail("--model: expected one source (--from-logits or --model), got both");
    return record_with_model(a, cmdline);
  }
  if (!a.corpus.empty() || !a.tokenizer.empty() || a.allow_other_model || !a.round.empty() ||
      a.prefill_block != 0 || !a.logits_out.empty() || a.batch != 0)
    kc::fail(
        "--corpus, --tokenizer, --allow-other-model, --round, --prefill-block, --logits-out, --batch: expected "
        "with --model MODEL, got no --model");
  if (a.from_logits.empty())
    kc::fail("--from-logits: expected a source (--from-logits LOGITS or --model MODEL; see kerncheck record --help), "
             "got none");
  if (!a.golden.empty()) {
    if (!a.tokens.empty() || !a.segments.empty())
      kc::fail(
          "--golden: expected the tokens and segments from the golden (candidate mode), got --tokens/--segments "
          "(drop them)");
    return record_candidate_from_logits(a, cmdline);
  }
  if (a.tokens.empty())
    kc::fail("--tokens: expected token ids in golden mode (or --golden GOLDEN to record a candidate), got none");
  if (!a.positions.empty()) kc::fail("--positions: expected candidate mode (--golden GOLDEN), got golden mode");
  return record_golden_from_logits(a, cmdline);
}

kc::cli::Registrar reg({"record", "record a golden or a candidate from full logits, with the f32 engine or from a running server", run});

}  // namespace
