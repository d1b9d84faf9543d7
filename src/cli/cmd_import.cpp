// kerncheck import: engine log-prob dumps → candidate (or llama.cpp's KLD base file → golden).
//
//   kerncheck import vllm      OUT.json   --golden GOLDEN -o CAND.safetensors
//   kerncheck import sglang    OUT.json   --golden GOLDEN -o CAND.safetensors
//   kerncheck import llamacpp  CAND.kld   --golden GOLDEN -o CAND.safetensors
//   kerncheck import llamacpp-base BASE.kld -o GOLDEN.safetensors [-k 20] [--domain prose]
//
// Exit 0 on success, 3 on bad input (malformed file, token mismatch, segment count). docs/importers.md.
#include <fmt/format.h>

#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "golden/importers.h"
#include "core/text_safe.h"

namespace kc::cli {
namespace {

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

void print_stats(const ImportStats& st, const std::string& out) {
  kc::printf_safe(stdout, 
      "wrote %s: %lld positions, golden top-k ids covered %.2f%% (%lld of %lld), fully covered positions "
      "%.2f%%",
      out.c_str(), static_cast<long long>(st.positions), 100 * st.coverage(),
      static_cast<long long>(st.ids_covered), static_cast<long long>(st.ids),
      st.positions ? 100.0 * st.positions_fully_covered / st.positions : 100.0);
  if (st.min_reported >= 0)
    kc::printf_safe(stdout, ", fewest ids listed at a position %lld", static_cast<long long>(st.min_reported));
  kc::printf_safe(stdout, "\n");
  if (st.token_unknown)
    kc::printf_safe(stdout, "  %lld positions without the corpus token's log-prob\n",
                static_cast<long long>(st.token_unknown));
  if (st.non_finite)
    kc::printf_safe(stdout, "  %lld positions with a non-finite log-prob (flagged NaN)\n",
                static_cast<long long>(st.non_finite));
  if (st.coverage() < 1)
    kc::printf_safe(stdout, 
        "  partial coverage: kerncheck test reports KL as [lower, upper] bounds; ask the engine for more "
        "top log-probs (vLLM --max-logprobs, SGLang token_ids_logprob) to tighten them\n");
}

int run_import(int argc, char** argv) {
  CLI::App app{
      "Import an engine's teacher-forced log-probs as a candidate (or llama.cpp's KLD base file as a "
      "golden). Formats: docs/importers.md."};
  std::string format, input, golden_path, out, domain = "prose", variant, model, tokenizer;
  int k = 20;
  app.add_option("format", format,
                 "vllm (prompt_logprobs JSON), sglang (/generate meta_info JSON), llamacpp (KLD file of the "
                 "candidate), llamacpp-base (KLD base file → golden)")
      ->required()
      ->check(CLI::IsMember({"vllm", "sglang", "llamacpp", "llamacpp-base"}));
  app.add_option("input", input, "the engine's output file (.json, .jsonl, or llama.cpp's KLD file)")
      ->required();
  app.add_option("--golden,-g", golden_path,
                 "golden the candidate is judged against (not for llamacpp-base)");
  app.add_option("-o,--output", out, "file to write (candidate, or golden for llamacpp-base)")->required();
  app.add_option("-k", k, "llamacpp-base: top-k ids kept per position")->capture_default_str();
  app.add_option("--domain", domain, "llamacpp-base: domain label of every chunk (code, prose, …)")
      ->capture_default_str();
  app.add_option("--variant", variant,
                 "label stored in the output's provenance (e.g. the kernel under test)");
  app.add_option("--model", model, "llamacpp-base: model identity string stored in the golden");
  app.add_option("--tokenizer", tokenizer, "llamacpp-base: tokenizer identity string stored in the golden");
  if (int rc = parse_or_exit(app, argc, argv); rc >= 0) return rc;

  Provenance made_by{format == "llamacpp-base" ? "llama.cpp" : format, variant, command_line(argc, argv)};
  if (format == "llamacpp-base") {
    if (!golden_path.empty()) fail("--golden: expected none with llamacpp-base (it writes a golden), got {}", golden_path);
    LlamaKldFile f = LlamaKldFile::open(input);
    GoldenMeta meta;
    GoldenBuffers buf;
    golden_from_llamacpp(f, k, domain, meta, buf);
    meta.identity.model = model;
    meta.identity.tokenizer = tokenizer;
    meta.made_by = made_by;
    write_golden(out, meta, buf.view());
    kc::printf_safe(stdout, 
        "wrote %s: golden with %lld positions (%d chunks × %zu scored tokens, n_ctx %u), k = %d, vocab %d\n",
        out.c_str(), static_cast<long long>(meta.n), f.n_chunk(), f.scored_per_chunk(), f.n_ctx(), k,
        f.n_vocab());
    return kExitPass;
  }
  if (golden_path.empty())
    fail("--golden: expected the golden for import {} (the candidate is matched to its positions), got none", format);
  Golden golden = read_golden(golden_path);
  ImportStats st;
  CandidateBuffers buf;
  if (format == "llamacpp") {
    LlamaKldFile f = LlamaKldFile::open(input);
    buf = candidate_from_llamacpp(golden, f, &st);
  } else {
    EngineDump dump = format == "vllm" ? read_vllm_logprobs(input) : read_sglang_logprobs(input);
    buf = candidate_from_engine(golden, dump, &st);
  }
  CandidateMeta meta = candidate_meta_for(golden, made_by);
  write_candidate(out, meta, buf.view());
  print_stats(st, out);
  return kExitPass;
}

Registrar reg({"import",
               "import vLLM / SGLang / llama.cpp log-probs as a candidate (or a KLD base file as a golden)",
               run_import});

}  // namespace
}  // namespace kc::cli
