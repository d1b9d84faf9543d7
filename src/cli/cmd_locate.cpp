// kerncheck locate: the first op, in data-flow order, whose error against the f32 reference leaves the noise
// implementations' spread (src/lab/locate.h, docs/locate.md).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "golden/golden.h"
#include "lab/locate.h"
#include "core/text_safe.h"

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t b = 0; !s.empty();) {
    const std::size_t e = s.find(',', b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{
      "Run the f32 reference, the noise variants and the candidate variant of kerncheck's engine over chosen "
      "positions of a golden (teacher forcing, as record replays it) and report, per layer and tensor in "
      "data-flow order and per phase, the candidate's relative error against the reference beside the noise "
      "runs', and the first site whose error leaves the noise runs' spread (docs/locate.md)."};
  app.name(argv[0]);
  kc::LocateOptions o;
  std::string tensors, positions = "random:64", report, json_out, html_out, method;
  std::uint64_t seed = 0;
  app.add_option("--model", o.model, "a .gguf or an HF checkpoint folder (the golden's model)")
      ->required()
      ->check(CLI::ExistingPath);
  app.add_option("--golden", o.golden, "a golden recorded with `kerncheck record --model` (.kcg)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--variant", o.variant, "the candidate precision variant (docs/lab.md), e.g. bf16+p=fp8")
      ->required();
  app.add_option("--noise-variant", o.noise,
                 "an equally correct implementation (repeat, at least 2), e.g. bf16 and bf16+order=1")
      ->required();
  app.add_option("--positions", positions,
                 "worst:N (the N worst positions of --report, judged with `kerncheck test --worst N`, plus a random "
                 "sample of max(N/4, 8)), random:N, or "
                 "A:B (golden indices [A, B))")
      ->capture_default_str();
  app.add_option("--report", report, "the candidate's judge report (`kerncheck test --json`), for worst:N")
      ->check(CLI::ExistingFile);
  app.add_option("--seed", seed, "seed of the random sample")->capture_default_str();
  app.add_option("--tensors", tensors, "comma-separated hook names (docs/engine.md); default every one the model "
                                       "reports");
  app.add_option("--alpha", o.alpha, "family-wise false-alarm level over all sites (Holm)")->capture_default_str();
  app.add_option("--min-factor", o.min_factor,
                 "a departing site's error must also be at least this many times the floor's (geometric mean)")
      ->capture_default_str();
  app.add_option("--cluster-positions", o.cluster_positions,
                 "positions per cluster of the variance estimate within a segment (0 = one cluster per segment)")
      ->capture_default_str();
  app.add_option("--compare", method,
                 "tensor method for the verdict at each site (mixed, stat_rel_err, close, cosine, …; default: as "
                 "`compare` routes the site's dtype)");
  app.add_flag("--no-compare", [&](std::int64_t) { o.verdicts = false; }, "skip the tensor verdicts");
  app.add_option("--tokenizer", o.tokenizer, "tokenizer (default: the model's)")->check(CLI::ExistingPath);
  app.add_flag("--allow-other-model", o.allow_other_model, "accept a model whose identity differs from the golden's");
  app.add_option("--json", json_out, "also write the result as JSON (docs/locate.md)");
  app.add_option("--html", html_out, "also write an HTML page: error vs layer per tensor with the noise band");
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  if (!method.empty()) {
    o.compare = kc::parse_method(method);
    if (!o.compare) kc::fail("--compare: expected a method of `kerncheck compare --help`, got {}", method);
  }
  o.tensors = split_commas(tensors);
  {
    kc::Golden g = kc::read_golden(o.golden);
    o.positions = kc::select_positions(g, positions, report, seed);
  }
  kc::LocateResult r = kc::run_locate(o);
  std::string text = kc::locate_text(r);
  if (!report.empty()) {  // the model-level verdict beside the tensor-level one
    const auto j = nlohmann::json::parse(kc::read_text_file(report, kc::kConfigTextCap, "a judge report"), nullptr,
                                         false);
    const bool pass = j.is_object() && j.contains("verdict") && j["verdict"] == "PASS";
    if (pass && (r.first[0] >= 0 || r.first[1] >= 0))
      text += "\nnote: the model-level judge PASSes this candidate, but a site leaves the floor: the model absorbs "
              "an error its kernels do not normally make\n";
  }
  kc::print_safe(stdout, text);
  if (!json_out.empty() && !html_out.empty()) {  // the page, as the JSON's folder sees it (for the judge's link)
    namespace fs = std::filesystem;
    const fs::path from = fs::absolute(json_out).lexically_normal().parent_path();
    r.html = fs::absolute(html_out).lexically_normal().lexically_relative(from).generic_string();
  }
  if (!json_out.empty()) kc::write_file_atomic(json_out, kc::locate_json(r));
  if (!html_out.empty()) kc::write_file_atomic(html_out, kc::locate_html(r));
  return (r.first[0] >= 0 || r.first[1] >= 0) ? 1 : 0;
}

kc::cli::Registrar reg({"locate", "the first op whose error leaves the noise runs' spread (from FAIL to here)",
                        run});

}  // namespace
