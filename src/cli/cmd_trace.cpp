// kerncheck trace: per-layer relative error of a precision variant's intermediate tensors against the f32
// reference on one prompt (src/lab/trace.h, docs/lab.md).
#include <cstdio>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/trace.h"
#include "core/text_safe.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "Run a reference (default the f32 engine) and a precision variant of kerncheck's engine on one prompt "
      "(prefill, then greedy "
      "decode steps on the reference's tokens) and report per layer and tensor the relative error "
      "||variant - reference||_2 / ||reference||_2, plus the final logits' error and KL (docs/lab.md)."};
  app.name(argv[0]);
  kc::TraceOptions o;
  std::string tensors, json_out;
  app.add_option("--model", o.model, "a .gguf or an HF checkpoint folder")
      ->required()
      ->check(CLI::ExistingPath);
  app.add_option("--variant", o.variant,
                 "precision variant, terms joined by '+': f32 | bf16 | p=f32|bf16|f16|fp8|fp8x448|fp8x256 | "
                 "kv=DTYPE | attn=exact|flash | gdn=f32|fla | order=SEED | logits=f32|bf16|f16 | "
                 "bug:NAME[@D]=STRENGTH | round:NAME[@LAYER]=BITS")
      ->required();
  app.add_option("--reference", o.reference,
                 "what the variant is compared with, same syntax (e.g. bf16: the production-like base with P "
                 "in f32, as the founding study's attention figures; docs/lab.md)")
      ->capture_default_str();
  app.add_option("--prompt", o.prompt_file, "prompt text file (UTF-8), tokenized with the model's tokenizer")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--tokenizer", o.tokenizer,
                 "tokenizer (default: the GGUF's metadata or the folder's tokenizer.json)")
      ->check(CLI::ExistingPath);
  auto* steps = app.add_option("--decode-steps", o.decode_steps, "greedy decode steps after the prefill")
                    ->capture_default_str();
  app.add_option("--decode-last", o.decode_last,
                 "decode the prompt's last N tokens one at a time (teacher-forced, like a corpus segment's "
                 "decode_last) instead of greedy steps; the prefill is the rest (0 = off)")
      ->capture_default_str()
      ->excludes(steps);
  app.add_option("--tensors", tensors,
                 "comma-separated hook names to trace (docs/engine.md); default attn.out,mlp.out,hidden and "
                 "gdn.state where the model has it");
  app.add_option("--max-tokens", o.max_tokens,
                 "longest prompt accepted (memory: both runs keep the traced tensors)")
      ->capture_default_str();
  app.add_option("--prefill-block", o.prefill_block, "feed the prefill in calls of N tokens (0 = one call)")
      ->capture_default_str();
  app.add_option("--reference-prefill-block", o.reference_prefill_block,
                 "the reference's prefill calls, if not those of --prefill-block (0 = one call; e.g. "
                 "--reference gdn=fla --variant gdn=fla --prefill-block 512 --reference-prefill-block 0 "
                 "shows what feeding the prompt in pieces does)");
  app.add_option("--json", json_out, "also write the result as JSON to this file");
  app.add_option("--dump", o.dump,
                 "write every captured tensor of both runs to this .safetensors (RUN/PHASE/NAME@LAYER)");
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  for (std::size_t b = 0; !tensors.empty();) {
    const std::size_t e = tensors.find(',', b);
    o.tensors.push_back(tensors.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  kc::TraceResult r = kc::run_trace(o);
  kc::print_safe(stdout, kc::trace_text(r));
  if (!json_out.empty()) kc::write_file_atomic(json_out, kc::trace_json(r));
  return 0;
}

kc::cli::Registrar reg({"trace",
                        "per-layer error of a precision variant against the f32 reference on one prompt",
                        run});

}  // namespace
