#include "lab/demo_steps.h"

#include <fmt/format.h>

#include <cstdio>

#include "core/error.h"
#include "judge/words.h"
#include "lab/record_model.h"
#include "lab/sweep.h"
#include "core/text_safe.h"

namespace kc::demo {

namespace fs = std::filesystem;

void Steps::begin(const std::string& what) {
  ++n_;
  ts_ = Clock::now();
  printf_safe(stdout, "[%2d] %s …\n", n_, what.c_str());
  std::fflush(stdout);
}

double Steps::end(const std::string& result) {
  double s = secs(ts_), tot = secs(t0_);
  printf_safe(stdout, "     %s (%.1f s; %.1f s so far)\n", result.c_str(), s, tot);
  std::fflush(stdout);
  return s;
}

std::string demo_begin(const DemoOptions& o) {
  const std::string model = o.model.empty() ? default_demo_model() : o.model;
  std::error_code ec;
  if (!fs::exists(model, ec))
    fail(
        "--model: {}: expected the SmolLM2-135M GGUF (run `bash scripts/fetch_smollm2.sh`, which prints its "
        "path) or a model given with --model, got no such file",
        model);
  const fs::path out = o.out_dir;
  fs::create_directories(out / "runs", ec);
  fs::create_directories(out / "reports", ec);
  if (ec) throw_input_error(o.out_dir, "--out-dir", "a folder that can be created", ec.message());
  printf_safe(stdout, "kerncheck demo, preset %s, model %s, output in %s/\n", o.preset.c_str(), model.c_str(),
              o.out_dir.c_str());
  return model;
}

Corpus demo_corpus(Steps& steps, const fs::path& out, CorpusOptions co, const DemoOptions& o,
                   const std::string& model) {
  // Building is deterministic and fast, so build it and keep the file when it is the same.
  steps.begin("building the corpus");
  const std::string tok_src = tokenizer_source(model);
  Tokenizer tok = load_tokenizer(tok_src);
  co.prose_files = o.prose_files;
  co.code_files = o.code_files;
  resolve_corpus_options(co);
  std::vector<SourceDoc> docs = o.prose_files.empty() && o.code_files.empty()
                                    ? default_sources()
                                    : read_sources(o.prose_files, o.code_files);
  Corpus corpus = build_corpus(co, docs, tok, tok_src);
  const std::string corpus_path = (out / "corpus.kcorpus").string();
  bool reused = false;
  std::error_code ec;
  {
    Corpus tmp = corpus;
    std::string probe = (out / "corpus.kcorpus.new").string();
    write_corpus(probe, tmp);  // fills the checksum
    try {
      if (fs::exists(corpus_path, ec)) {
        Corpus had = read_corpus(corpus_path);
        reused = had.checksum == tmp.checksum && had.sources_id == tmp.sources_id;
      }
    } catch (const Error&) {
      reused = false;
    }
    if (reused)
      fs::remove(probe, ec);
    else
      fs::rename(probe, corpus_path, ec);
    if (ec) throw_input_error(corpus_path, "write", "a writable folder", ec.message());
    corpus = read_corpus(corpus_path);
  }
  // The corpus identity (its tokens) and its sources' (their bytes): two users who see the same pair ran
  // the same input.
  steps.end(fmt::format("{} {}: {} segments, {} scored positions; corpus {}, sources {}",
                        reused ? "reused" : "wrote", corpus_path, corpus.segments.size(), corpus.positions(),
                        corpus.identity(), corpus.sources_id));
  return corpus;
}

namespace {

bool golden_matches(const std::string& path, const std::string& corpus_id, const std::string& model_id,
                    int k) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  try {
    Golden g = read_golden(path);
    return g.meta.identity.corpus == corpus_id && g.meta.identity.model == model_id && g.meta.k == k &&
           canonical_variant(g.meta.made_by.variant.empty() ? "f32" : g.meta.made_by.variant, path) == "f32";
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

std::string demo_golden(Steps& steps, const fs::path& out, const Corpus& corpus, const std::string& model,
                        std::map<std::string, double>& record_seconds) {
  const std::string corpus_path = (out / "corpus.kcorpus").string();
  const std::string golden_path = (out / "golden.kcg").string();
  steps.begin("recording the f32 golden");
  const bool reused = golden_matches(golden_path, corpus.identity(), model_identity(model), 20);
  if (!reused) {
    RecordModelOptions ro;
    ro.model = model;
    ro.corpus = corpus_path;
    ro.out = golden_path;
    ro.k = 20;
    ro.command_line =
        fmt::format("kerncheck record --model {} --corpus {} -o {}", model, corpus_path, golden_path);
    record_golden_with_model(ro);
  }
  record_seconds["golden (f32)"] = steps.end(reused ? "reused " + golden_path : "wrote " + golden_path);
  return golden_path;
}

std::map<std::string, std::string> demo_candidates(Steps& steps, const fs::path& out, const std::string& model,
                                                   const std::string& golden_path, const std::vector<Run>& runs,
                                                   std::map<std::string, double>& record_seconds) {
  std::map<std::string, std::string> path_of;
  for (const Run& r : runs) {
    path_of[r.name] = (out / "runs" / (r.name + ".kcc")).string();
    steps.begin(fmt::format("recording {} ({})", r.name, r.variant));
    bool reused = record_candidate_cached({model, golden_path, path_of[r.name], r.variant, "", 0});
    record_seconds[r.name] = steps.end(reused ? "reused " + path_of[r.name] : "wrote " + path_of[r.name]);
  }
  return path_of;
}

std::map<std::string, JudgeAccumulator> accumulate_runs(const Golden& golden, const std::vector<Run>& runs,
                                                        const std::map<std::string, std::string>& path_of) {
  std::map<std::string, JudgeAccumulator> acc;
  for (const Run& r : runs) {
    CandidateInput ci = open_candidate_input(path_of.at(r.name), golden);
    acc[r.name] = accumulate(golden, ci, nullptr);
  }
  return acc;
}

std::pair<std::vector<JudgeAccumulator>, std::vector<std::string>> floor_for(
    const Run& r, const std::vector<Run>& runs, std::map<std::string, JudgeAccumulator>& acc,
    const std::map<std::string, std::string>& path_of) {
  std::pair<std::vector<JudgeAccumulator>, std::vector<std::string>> f;
  for (const Run& n : runs)
    if (n.role == "noise" && n.name != r.name) f.first.push_back(acc[n.name]), f.second.push_back(path_of.at(n.name));
  return f;
}

nlohmann::ordered_json demo_json_head(const std::string& format, const DemoOptions& o, const std::string& model,
                                      const std::string& golden_path, const Golden& golden, const Corpus& corpus) {
  nlohmann::ordered_json j;
  j["format"] = format;  // demo-summary: python/kerncheck/schemas/demo-summary.json (depth.json: no schema yet)
  j["version"] = 1;
  j["preset"] = o.preset;
  j["model"] = model;
  j["golden"] = golden_path;
  j["positions"] = golden.meta.n;
  j["corpus"] = corpus.identity();
  j["corpus_sources"] = corpus.sources_id;
  return j;
}

const FloorTest* floor_test_of(const JudgeReport& r, const SplitId& split) {
  for (const auto& f : r.floor_tests)
    if (f.split == split) return &f;
  return nullptr;
}

Verdict overall_verdict(const Judged& j) {
  auto rank = [](Verdict v) { return v == Verdict::fail ? 2 : v == Verdict::inconclusive ? 1 : 0; };
  return rank(j.floor_report.verdict) >= rank(j.th_report.verdict) ? j.floor_report.verdict
                                                                   : j.th_report.verdict;
}

const char* const kVerdictColumns =
    "vs floor: is the run within the normal difference of the equally correct floor runs (the floor test, "
    "the "
    "KL limits, the flip tests)? vs thresholds: is it on the good side of the limits calibrated from the "
    "demo's known good and bad runs (they only say what separates those runs; a limit never rests on a tail "
    "statistic of a small split)? verdict: the stricter of the two (a miss is never acceptable: either one "
    "failing fails the run).";

std::string failing_in_words(const JudgeReport& r, std::size_t n) {
  std::string s;
  std::size_t c = 0;
  for (const auto& f : r.findings)
    if (f.failed && c++ < n) s += (s.empty() ? "" : "; ") + words::sentence(f);
  return s;
}

}  // namespace kc::demo
