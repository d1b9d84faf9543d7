// The floor manifest: reader, writer and the measured spread (floor_manifest.h, docs/floor.md).
#include "judge/floor_manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/mapped_file.h"
#include "judge/report_format.h"
#include "judge/words.h"
#include "metrics/distribution.h"

namespace kc {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using report::num;

namespace {

// ---- reading: every field the judge uses is checked, by name ------------------------------------------------
struct Reader {
  const std::string& file;
  [[noreturn]] void bad(const std::string& field, const std::string& expected, const ojson* got) const {
    throw_input_error(file, field, expected, got ? (got->is_null() ? "nothing" : got->dump().substr(0, 80)) : "nothing");
  }
  const ojson& object(const ojson& j, const std::string& field) const {
    if (!j.is_object()) bad(field, "a JSON object", &j);
    return j;
  }
  std::string string(const ojson& parent, const std::string& key, const std::string& field, bool empty_ok = false,
                     bool null_ok = false) const {
    auto it = parent.find(key);
    if (it == parent.end()) bad(field, "a string", nullptr);
    if (null_ok && it->is_null()) return "";
    if (!it->is_string() || (!empty_ok && it->get<std::string>().empty()))
      bad(field, empty_ok ? "a string" : "a non-empty string", &*it);
    return it->get<std::string>();
  }
  double number(const ojson& parent, const std::string& key, const std::string& field) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return NAN;  // informational numbers may be absent (NaN)
    if (it->is_number()) return it->get<double>();
    if (it->is_string() && (*it == "inf" || *it == "-inf")) return *it == "inf" ? INFINITY : -INFINITY;
    bad(field, "a number, \"inf\", \"-inf\" or null", &*it);
  }
};

void check_checksum_text(const Reader& r, const std::string& v, const std::string& field) {
  if (v.rfind("xxh3:", 0) != 0 || v.size() != 21 ||
      v.find_first_not_of("0123456789abcdef", 5) != std::string::npos)
    throw_input_error(r.file, field, "\"xxh3:\" and 16 hex digits", "\"" + v.substr(0, 40) + "\"");
}

FloorRun read_run(const Reader& r, const ojson& j, std::size_t i, const fs::path& dir) {
  const std::string at = fmt::format("runs[{}]", i);
  r.object(j, at);
  FloorRun run;
  run.name = r.string(j, "name", at + ".name");
  run.file = r.string(j, "file", at + ".file");
  run.path = fs::path(run.file).is_absolute() ? run.file : (dir / run.file).string();
  run.checksum = r.string(j, "checksum", at + ".checksum");
  check_checksum_text(r, run.checksum, at + ".checksum");
  run.tensors = r.string(j, "tensors", at + ".tensors");
  check_checksum_text(r, run.tensors, at + ".tensors");
  run.made_by.engine = r.string(j, "engine", at + ".engine");
  run.made_by.variant = r.string(j, "variant", at + ".variant", true);
  run.engine_version = r.string(j, "engine_version", at + ".engine_version", true, true);
  run.hardware = r.string(j, "hardware", at + ".hardware", true, true);
  if (auto c = j.find("configuration"); c != j.end()) run.configuration = r.object(*c, at + ".configuration");
  run.kl_mean = r.number(j, "kl_mean", at + ".kl_mean");
  return run;
}

ojson spread_json(const FloorManifest& m) {
  const FloorSpread& s = m.spread;
  ojson groups = ojson::array();
  for (auto& g : s.identical) {
    ojson names = ojson::array();
    for (std::size_t i : g) names.push_back(m.runs[i].name);
    groups.push_back(names);
  }
  ojson pairs = ojson::array();
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (auto& p : s.pairs) {
    pairs.push_back({{"a", m.runs[p.a].name}, {"b", m.runs[p.b].name}, {"kl_mean", num(p.kl_mean)},
                     {"positions", p.positions}});
    lo = std::min(lo, p.kl_mean), hi = std::max(hi, p.kl_mean), sum += p.kl_mean;
  }
  const double n = static_cast<double>(s.pairs.size());
  ojson power = ojson::array();
  for (auto& p : s.power)
    power.push_back({{"split", p.split}, {"spread", p.spread}, {"mde_ratio", num(p.mde_ratio)}});
  return {{"runs", m.runs.size()},
          {"distinct", s.identical.size()},
          {"degenerate", s.degenerate()},
          {"identical_groups", groups},
          {"pairwise_kl_mean",
           {{"mean", num(n ? sum / n : NAN)}, {"min", num(n ? lo : NAN)}, {"max", num(n ? hi : NAN)},
            {"pairs", pairs}}},
          {"floor_test",
           {{"alpha", num(s.alpha)},
            {"power", num(s.power_level)},
            {"mde_target", num(s.mde_target)},
            {"kl_factor", num(s.kl_factor)},
            {"splits", power}}},
          {"sentence", s.sentence}};
}

// KL(a ‖ b) at one position over the golden's top-k ids that both runs reported, plus everything else in
// one bucket: a lower bound of the full-vocabulary KL between the two runs (log-sum inequality).
double pair_kl(const CandidateArrays& a, const CandidateArrays& b, std::int64_t n, int k, std::vector<float>& lp,
               std::vector<float>& lq) {
  const std::size_t at = static_cast<std::size_t>(n) * k;
  lp.clear(), lq.clear();
  double pa = 0, pb = 0;
  for (int j = 0; j < k; ++j) {
    const bool ca = a.covered.empty() || a.covered[at + j], cb = b.covered.empty() || b.covered[at + j];
    if (!ca || !cb) continue;
    lp.push_back(a.logprobs_at_ref[at + j]), lq.push_back(b.logprobs_at_ref[at + j]);
    pa += std::exp(static_cast<double>(lp.back())), pb += std::exp(static_cast<double>(lq.back()));
  }
  const double floor = q_other_floor(k);
  const float lpo = static_cast<float>(std::log(std::max(1.0 - pa, floor)));
  const float lqo = static_cast<float>(std::log(std::max(1.0 - pb, floor)));
  return score_topk(lp.data(), lpo, lq.data(), lqo, nullptr, static_cast<int>(lp.size())).kl;
}

std::string power_sentence(const FloorSpread& s) {
  std::string parts;
  for (auto& p : s.power)
    parts += fmt::format("{}{}: {}", parts.empty() ? "" : ", ", p.split,
                         p.spread ? fmt::format("{:.3g}×", p.mde_ratio)
                                  : std::string("none (the runs do not differ there: fixed limits only)"));
  return parts;
}

}  // namespace

FloorManifest read_floor_manifest(const std::string& path) {
  const std::string text = read_text_file(path, kConfigTextCap, "a floor manifest");
  ojson j;
  try {
    j = ojson::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw_input_error(path, "syntax", "valid JSON (a floor manifest from kerncheck floor)", e.what());
  }
  const Reader r{path};
  r.object(j, "(top level)");
  const std::string format = r.string(j, "format", "format");
  if (format != kFloorManifestFormat)
    throw_input_error(path, "format", fmt::format("\"{}\"", kFloorManifestFormat), "\"" + format + "\"");
  auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer() || *v != 1) r.bad("version", "1", v == j.end() ? nullptr : &*v);
  FloorManifest m;
  m.path = path;
  const ojson g = j.contains("golden") ? j["golden"] : ojson();
  r.object(g, "golden");
  m.golden_checksum = r.string(g, "checksum", "golden.checksum");
  check_checksum_text(r, m.golden_checksum, "golden.checksum");
  m.golden_path = r.string(g, "path", "golden.path", true, true);
  m.model = r.string(g, "model", "golden.model", true, true);
  m.corpus = r.string(g, "corpus", "golden.corpus", true, true);
  m.engine = r.string(j, "engine", "engine");
  m.variant = r.string(j, "variant", "variant", true);
  m.served_model = r.string(j, "served_model", "served_model", true, true);
  if (auto p = j.find("plan"); p != j.end() && !p->is_null()) {
    r.object(*p, "plan");
    m.plan = r.string(*p, "path", "plan.path", true, true);
    m.plan_sha256 = r.string(*p, "sha256", "plan.sha256", true, true);
  }
  auto runs = j.find("runs");
  if (runs == j.end() || !runs->is_array() || runs->empty())
    r.bad("runs", "a non-empty array of runs", runs == j.end() ? nullptr : &*runs);
  const fs::path dir = fs::path(path).parent_path();
  std::set<std::string> names;
  for (std::size_t i = 0; i < runs->size(); ++i) {
    m.runs.push_back(read_run(r, (*runs)[i], i, dir));
    if (!names.insert(m.runs.back().name).second)
      throw_input_error(path, fmt::format("runs[{}].name", i), "a name no other run has",
                        "\"" + m.runs.back().name + "\" again");
    if (m.runs.back().made_by.engine != m.engine)
      throw_input_error(path, fmt::format("runs[{}].engine", i), fmt::format("the manifest's engine \"{}\"", m.engine),
                        "\"" + m.runs.back().made_by.engine + "\"");
  }
  if (auto s = j.find("spread"); s != j.end() && s->is_object())
    if (auto t = s->find("sentence"); t != s->end() && t->is_string()) m.spread.sentence = *t;
  return m;
}

ojson floor_manifest_json(const FloorManifest& m) {
  ojson runs = ojson::array();
  std::map<std::string, std::string> first_with;  // tensors hash → the first run that has it
  for (const FloorRun& r : m.runs) {
    auto [it, fresh] = first_with.emplace(r.tensors, r.name);
    runs.push_back({{"name", r.name},
                    {"file", r.file},
                    {"checksum", r.checksum},
                    {"tensors", r.tensors},
                    {"same_bits_as", fresh ? ojson(nullptr) : ojson(it->second)},
                    {"engine", r.made_by.engine},
                    {"variant", r.made_by.variant},
                    {"engine_version", r.engine_version},
                    {"hardware", r.hardware},
                    {"configuration", r.configuration},
                    {"kl_mean", num(r.kl_mean)}});
  }
  return {{"format", kFloorManifestFormat},
          {"version", 1},
          {"plan", {{"path", m.plan}, {"sha256", m.plan_sha256}}},
          {"golden", {{"path", m.golden_path}, {"checksum", m.golden_checksum}, {"model", m.model}, {"corpus", m.corpus}}},
          {"engine", m.engine},
          {"variant", m.variant},
          {"served_model", m.served_model.empty() ? ojson(nullptr) : ojson(m.served_model)},
          {"runs", runs},
          {"spread", spread_json(m)}};
}

void write_floor_manifest(const std::string& path, const FloorManifest& m) {
  write_file_atomic(path, floor_manifest_json(m).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::vector<std::size_t> judged_runs(const std::vector<FloorRun>& runs) {
  std::vector<std::size_t> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (seen.insert(runs[i].tensors).second) out.push_back(i);
  if (out.size() == 1) {
    out.clear();
    for (std::size_t i = 0; i < runs.size(); ++i) out.push_back(i);
  }
  return out;
}

std::string candidate_tensors_hash(const CandidateArrays& a) {
  Xxh64 h;
  auto add = [&](auto span) {
    h.update({reinterpret_cast<const std::uint8_t*>(span.data()), span.size_bytes()});
  };
  add(a.logprobs_at_ref), add(a.other_logprob), add(a.top1_id), add(a.top1_logprob), add(a.token_logprob);
  add(a.flags), add(a.covered);
  return "xxh3:" + h.hex();
}

FloorSpread measure_floor_spread(const Golden& golden, const std::string& golden_path, std::vector<FloorRun>& runs,
                                 const JudgeOptions& o) {
  KC_ASSERT(!runs.empty(), "measure_floor_spread: no runs");
  FloorSpread s;
  s.alpha = o.alpha, s.power_level = o.power, s.mde_target = o.mde_target, s.kl_factor = o.kl_factor;
  std::vector<Candidate> cands;
  std::vector<JudgeAccumulator> acc;
  std::vector<std::string> paths;
  for (FloorRun& r : runs) {
    CandidateInput ci = open_candidate_input(r.path, golden);
    if (ci.in_memory)
      throw_input_error(r.path, "kerncheck.format", "a candidate file (kerncheck record)", "full logits");
    r.checksum = ci.cand.meta.checksum;
    r.made_by = ci.cand.meta.made_by;
    r.tensors = candidate_tensors_hash(ci.cand.a);
    acc.push_back(accumulate(golden, ci, nullptr));
    paths.push_back(r.path);
    cands.push_back(std::move(ci.cand));
  }
  // Groups of identical runs, in plan order.
  std::map<std::string, std::size_t> group_of;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    auto [it, fresh] = group_of.emplace(runs[i].tensors, s.identical.size());
    if (fresh) s.identical.emplace_back();
    s.identical[it->second].push_back(i);
  }
  // KL between every pair of runs (both files cover the same positions: open_candidate_input checked
  // them against the golden).
  std::vector<float> lp, lq;
  for (std::size_t a = 0; a < runs.size(); ++a)
    for (std::size_t b = a + 1; b < runs.size(); ++b) {
      FloorPair p{a, b, 0.0, 0};
      const CandidateArrays &x = cands[a].a, &y = cands[b].a;
      const std::int64_t n = std::min(cands[a].meta.n, cands[b].meta.n);
      double sum = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        if ((x.flags[i] | y.flags[i]) & kFlagsBroken) continue;
        const double kl = runs[a].tensors == runs[b].tensors ? 0.0 : pair_kl(x, y, i, golden.meta.k, lp, lq);
        if (!std::isfinite(kl)) continue;
        sum += kl, ++p.positions;
      }
      p.kl_mean = p.positions ? sum / static_cast<double>(p.positions) : NAN;
      s.pairs.push_back(p);
    }
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].kl_mean = summarize(acc[i], paths[i]).overall.kl.mean;
  // The floor test as a candidate judged against these runs sees it (judged_runs, as `test --floor` reads
  // them; the first run stands in for the candidate: the test's spread and its MDE come from the floor runs).
  std::vector<JudgeAccumulator> floor_acc;
  std::vector<std::string> floor_paths;
  for (std::size_t i : judged_runs(runs)) floor_acc.push_back(acc[i]), floor_paths.push_back(paths[i]);
  const JudgeReport rep = judge(golden.meta, golden_path, acc[0], paths[0], floor_acc, floor_paths, nullptr, o);
  int deepest = -1;
  for (const SplitSummary& d : rep.cand.by_depth)
    if (d.n >= o.min_split_center) deepest = std::max(deepest, d.id.index);
  std::vector<SplitId> matters;
  for (const SplitSummary& p : rep.cand.by_phase)
    if (p.id == SplitId::phase(1) && p.n >= o.min_split_center) matters.push_back(p.id);
  if (deepest >= 0) matters.push_back(SplitId::depth(deepest));
  for (const SplitId& id : matters) {
    FloorPower p{id.label(), NAN, false};
    for (const FloorTest& t : rep.floor_tests)
      if (t.split == id) p.mde_ratio = t.mde_ratio, p.spread = true;
    s.power.push_back(p);
  }
  if (s.degenerate())
    s.sentence = words::floor_no_spread(runs.size(), o.kl_factor);
  else
    s.sentence = words::floor_spread(runs.size(), s.identical.size(), power_sentence(s), o.power, o.mde_target);
  return s;
}

}  // namespace kc
