// Thresholds (TOML) and shard files of the judge.
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/suggest.h"
#include "io/safetensors.h"
#include "judge/judge.h"

namespace kc {

// ---- thresholds -----------------------------------------------------------------------------------------
namespace {
// The statistics a limit can name: the table of metrics/statistics.h, per split (prefix "", "domain.NAME.",
// "phase.prefill." / "phase.decode." or "depth.NAME.") and run-wide.
void check_limit_name(const std::string& path, const std::string& key) {
  const std::string field = fmt::format("limits.\"{}\"", key);
  const std::vector<std::string> split_stats = statistic_names(StatScope::split);
  const auto dot = key.rfind('.');
  if (dot == std::string::npos) {
    if (find_statistic(key)) return;
    std::vector<std::string> all = split_stats, run = statistic_names(StatScope::run);
    all.insert(all.end(), run.begin(), run.end());
    throw_input_error(path, field, "a statistic the judge measures (docs/judge.md)",
                      fmt::format("unknown statistic \"{}\"{}", key, did_you_mean(key, all)));
  }
  const std::string stat = key.substr(dot + 1), prefix = key.substr(0, dot + 1);
  const auto first = key.find('.');
  const std::string kind = key.substr(0, first);
  if ((kind != "domain" && kind != "phase" && kind != "depth") || first == dot)
    throw_input_error(path, field, "a split prefix domain.NAME., phase.NAME. or depth.NAME. before the statistic",
                      fmt::format("\"{}\"{}", prefix,
                                  did_you_mean(kind, std::vector<std::string>{"domain", "phase", "depth"})));
  if (kind == "phase" && prefix != "phase.prefill." && prefix != "phase.decode.")
    throw_input_error(path, field, "phase.prefill. or phase.decode.", "\"" + prefix + "\"");
  if (kind == "depth") {  // a bucket by its lower edge: 0 or a power of two (depth.64. holds depths 64 … 127)
    const std::string edge = key.substr(first + 1, dot - first - 1);
    std::int64_t d = -1;
    auto [end, ec] = std::from_chars(edge.data(), edge.data() + edge.size(), d);
    const bool number = ec == std::errc() && end == edge.data() + edge.size() && d >= 0;
    if (!number || depth_bucket_lower(depth_bucket(d)) != d)
      throw_input_error(
          path, field,
          "a depth bucket's lower edge: depth.0., depth.1., depth.2., depth.4., … (powers of two)",
          fmt::format("\"{}\"{}", prefix,
                      number ? fmt::format(" (depth {} is in the bucket depth.{}.)", d,
                                           depth_bucket_lower(depth_bucket(d)))
                             : std::string()));
  }
  const StatDef* d = find_statistic(stat);
  if (!d || d->scope != StatScope::split)
    throw_input_error(path, field, "a per-split statistic the judge measures (docs/judge.md)",
                      fmt::format("unknown statistic \"{}\"{}", stat, did_you_mean(stat, split_stats, prefix)));
}
}  // namespace

Thresholds read_thresholds(const std::string& path) {
  Thresholds t;
  t.path = path;
  toml::table tbl;
  const std::string text = read_text_file(path, kConfigTextCap, "a thresholds file");
  try {
    tbl = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw_input_error(fmt::format("{}:{}:{}", path, e.source().begin.line, e.source().begin.column), "syntax",
                      "valid TOML", e.description());
  }
  // Unknown keys are errors: a misspelt statistic would otherwise be a limit that is never checked.
  for (auto& [key, node] : tbl)
    if (key.str() != "kerncheck" && key.str() != "limits")
      throw_input_error(path, fmt::format("[{}]", key.str()), "only the tables [kerncheck] and [limits]",
                        fmt::format("unknown table \"{}\"{}", key.str(),
                                    did_you_mean(key.str(), std::vector<std::string>{"kerncheck", "limits"})));
  if (auto* k = tbl["kerncheck"].as_table())
    for (auto& [key, node] : *k) {
      static const std::vector<std::string> known{"format", "version", "golden_checksum"};
      if (std::find(known.begin(), known.end(), key.str()) == known.end())
        throw_input_error(path, fmt::format("kerncheck.{}", key.str()), "format, version or golden_checksum",
                          fmt::format("unknown key \"{}\"{}", key.str(), did_you_mean(key.str(), known)));
    }
  auto* kc_tbl = tbl["kerncheck"].as_table();
  if (!kc_tbl) throw_input_error(path, "[kerncheck]", "a table with format = \"thresholds\"", "nothing");
  auto fmt_v = (*kc_tbl)["format"].value<std::string>();
  if (!fmt_v || *fmt_v != "thresholds")
    throw_input_error(path, "kerncheck.format", "\"thresholds\"", fmt_v ? "\"" + *fmt_v + "\"" : "nothing");
  auto ver = (*kc_tbl)["version"].value<std::int64_t>();
  if (!ver || *ver != 1)
    throw_input_error(path, "kerncheck.version", "1", ver ? std::to_string(*ver) : "nothing");
  if (auto g = (*kc_tbl)["golden_checksum"].value<std::string>()) t.golden_checksum = *g;
  auto* lim = tbl["limits"].as_table();
  if (!lim) throw_input_error(path, "[limits]", "a table of statistic = limit", "nothing");
  for (auto& [key, node] : *lim) {
    check_limit_name(path, std::string(key.str()));
    auto v = node.value<double>();
    if (!v || std::isnan(*v))
      throw_input_error(path, fmt::format("limits.\"{}\"", key.str()), "a number", "something else");
    t.limits[std::string(key.str())] = *v;
  }
  return t;
}

std::string thresholds_to_toml(const Thresholds& t, const std::string& comment) {
  std::ostringstream o;
  std::istringstream c(comment);
  for (std::string line; std::getline(c, line);) o << "# " << line << "\n";
  o << "[kerncheck]\nformat = \"thresholds\"\nversion = 1\n";
  o << "golden_checksum = \"" << t.golden_checksum << "\"\n\n[limits]\n";
  for (auto& [k, v] : t.limits) o << "\"" << k << "\" = " << fmt::format("{:.17g}", v) << "\n";
  return o.str();
}

// ---- shards ----------------------------------------------------------------------------------------------
namespace {
using nlohmann::json;

json golden_meta_json(const GoldenMeta& m) {
  return {{"k", m.k},
          {"vocab", m.vocab},
          {"n", m.n},
          {"model", m.identity.model},
          {"tokenizer", m.identity.tokenizer},
          {"corpus", m.identity.corpus},
          {"engine", m.made_by.engine},
          {"variant", m.made_by.variant},
          {"command_line", m.made_by.command_line},
          {"segments", segments_to_json(m.segments)},
          {"checksum", m.checksum}};
}

GoldenMeta golden_meta_from(const json& j, const std::string& file) {
  GoldenMeta m;
  m.k = j.at("k");
  m.vocab = j.at("vocab");
  m.n = j.at("n");
  m.identity = {j.at("model"), j.at("tokenizer"), j.at("corpus")};
  m.made_by = {j.at("engine"), j.at("variant"), j.at("command_line")};
  m.segments = segments_from_json(j.at("segments").get<std::string>(), file, m.n);
  m.checksum = j.at("checksum");
  return m;
}

json provenance_json(const Provenance& p) {
  return {{"engine", p.engine}, {"variant", p.variant}, {"command_line", p.command_line}};
}

Provenance provenance_from(const json& j) {
  return {j.at("engine"), j.at("variant"), j.at("command_line")};
}

Tensor f32_tensor(const std::vector<float>& v, const char* name) {
  Tensor t;
  t.dtype = DType::float32;
  t.shape = {static_cast<std::int64_t>(v.size())};
  t.bytes = {reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * 4};
  t.origin = name;
  return t;
}

std::vector<float> read_f32(const SafetensorsFile& f, const std::string& name) {
  if (!f.contains(name)) return {};
  Tensor t = f.tensor(name);
  if (t.dtype != DType::float32 || t.shape.size() != 1)
    throw_input_error(f.path(), "tensor " + name, "a 1-D F32 tensor", t.shape_str());
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), t.bytes.data(), v.size() * 4);
  return v;
}
}  // namespace

void write_partial(const std::string& path, const Partial& p) {
  std::map<std::string, std::string> md;
  md["kerncheck.format"] = "partial";
  md["kerncheck.version"] = kFormatVersion;
  md["golden"] = golden_meta_json(p.golden).dump();
  md["golden_path"] = p.golden_path;
  md["candidate_path"] = p.candidate_path;
  md["noise_paths"] = json(p.noise_paths).dump();
  md["candidate_made_by"] = provenance_json(p.candidate_made_by).dump();
  json nm = json::array();
  for (auto& n : p.noise_made_by) nm.push_back(provenance_json(n));
  md["noise_made_by"] = nm.dump();
  std::vector<std::vector<float>> store;
  std::vector<const JudgeAccumulator*> runs{&p.cand};
  for (auto& n : p.noise) runs.push_back(&n);
  store.reserve(runs.size() * 2);
  std::vector<NamedTensor> tensors;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    md[fmt::format("run{}", r)] = runs[r]->to_json().dump();
    for (int which = 0; which < 2; ++which) {
      store.push_back(runs[r]->all_values(which));
      if (store.back().empty()) continue;
      std::string name = fmt::format("run{}.{}", r, which ? "full_kl" : "kl");
      tensors.push_back({name, f32_tensor(store.back(), "partial")});
    }
  }
  // Sealed: a shard's counts decide merge's verdict, so every byte of it is checked on read.
  write_sealed_safetensors(path, tensors, std::move(md));
}

Partial read_partial(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_partial(file->bytes(), path, true);
}

Partial parse_partial(std::span<const std::uint8_t> bytes, const std::string& path, bool verify_checksum) {
  SafetensorsFile f = SafetensorsFile::parse(bytes, path, nullptr);
  const auto& md = f.metadata();
  auto get = [&](const std::string& key) {
    auto it = md.find(key);
    if (it == md.end()) throw_input_error(path, "metadata " + key, "present (a kerncheck shard)", "nothing");
    return it->second;
  };
  if (get("kerncheck.format") != "partial")
    throw_input_error(path, "metadata kerncheck.format", "\"partial\"",
                      "\"" + get("kerncheck.format").substr(0, 40) + "\"");
  if (get("kerncheck.version") != kFormatVersion)
    throw_input_error(path, "metadata kerncheck.version", fmt::format("\"{}\"", kFormatVersion),
                      "\"" + get("kerncheck.version").substr(0, 40) +
                          (get("kerncheck.version") == "1"
                               ? "\" (written by an older kerncheck, without a checksum: rerun test --partial)"
                               : "\""));
  if (verify_checksum) verify_sealed(f);  // before any count is used
  Partial p;
  try {
    p.golden = golden_meta_from(json::parse(get("golden")), path);
    p.golden_path = get("golden_path");
    p.candidate_path = get("candidate_path");
    p.noise_paths = json::parse(get("noise_paths")).get<std::vector<std::string>>();
    // Absent in shards written before merge checked the floor (then nothing to compare, as for logits).
    if (md.count("candidate_made_by")) p.candidate_made_by = provenance_from(json::parse(get("candidate_made_by")));
    if (md.count("noise_made_by"))
      for (auto& n : json::parse(get("noise_made_by"))) p.noise_made_by.push_back(provenance_from(n));
  } catch (const json::exception& e) {
    throw_input_error(path, "metadata",
                      "a shard's golden, golden_path, candidate_path, noise_paths, candidate_made_by and "
                      "noise_made_by (JSON)",
                      e.what());
  }
  if (!p.noise_made_by.empty() && p.noise_made_by.size() != p.noise_paths.size())
    throw_input_error(path, "metadata noise_made_by", fmt::format("{} entries (one per noise run)", p.noise_paths.size()),
                      fmt::format("{}", p.noise_made_by.size()));
  for (std::size_t r = 0; r <= p.noise_paths.size(); ++r) {
    json j;
    try {
      j = json::parse(get(fmt::format("run{}", r)));
    } catch (const json::exception& e) {
      throw_input_error(path, fmt::format("metadata run{}", r), "valid JSON (an accumulator)", e.what());
    }
    JudgeAccumulator a = JudgeAccumulator::from_json(j, path);
    // Every run is paired with the candidate segment by segment (the floor test, the depth profile): a run of
    // another shape (a re-sealed shard can lie) is refused here, not read out of bounds.
    const JudgeAccumulator& first = r == 0 ? a : p.cand;
    if (a.k != p.golden.k || a.n_segments != static_cast<int>(p.golden.segments.size()) || a.domains != first.domains)
      throw_input_error(path, fmt::format("metadata run{} k, domains, n_segments", r),
                        fmt::format("k = {}, {} segments (the golden's) and run0's {} domains", p.golden.k,
                                    p.golden.segments.size(), first.domains.size()),
                        fmt::format("k = {}, {} segments, {} domains", a.k, a.n_segments, a.domains.size()));
    a.set_values(0, read_f32(f, fmt::format("run{}.kl", r)), path);
    a.set_values(1, read_f32(f, fmt::format("run{}.full_kl", r)), path);
    if (r == 0)
      p.cand = std::move(a);
    else
      p.noise.push_back(std::move(a));
  }
  return p;
}

namespace {
// Noise run r of two shards is the same run when the shards name the same file, or, for files recorded in
// pieces (other paths), when both say which engine and variant made them and these agree. A run without
// provenance (logits) is known by its path only.
bool same_run(const std::string& path_a, const Provenance& a, const std::string& path_b,
              const Provenance& b) {
  if (path_a == path_b) return true;
  const bool known = !a.engine.empty() && a.engine != "logits" && !b.engine.empty() && b.engine != "logits";
  return known && a.engine == b.engine && a.variant == b.variant;
}

std::string run_named(const std::string& path, const Provenance& p) {
  return p.engine.empty() || p.engine == "logits"
             ? path
             : fmt::format("{} (engine {}, variant \"{}\")", path, p.engine, p.variant);
}

void append_path(std::string& list, const std::string& path) {
  std::size_t at = 0;  // the list "a, b": add path unless it is one of them
  while (at <= list.size()) {
    const std::size_t e = std::min(list.find(", ", at), list.size());
    if (list.compare(at, e - at, path) == 0 && e - at == path.size()) return;
    at = e + 2;
  }
  list += ", " + path;
}
}  // namespace

Partial merge_partials(const std::vector<Partial>& parts, const std::vector<std::string>& paths) {
  if (parts.empty()) throw_input_error("merge", "shards", "at least one --partial shard", "none");
  auto name = [&](std::size_t i) { return i < paths.size() ? paths[i] : fmt::format("shard {}", i + 1); };
  Partial m = parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const Partial& p = parts[i];
    if (p.golden.checksum != m.golden.checksum)
      throw_input_error(name(i), "golden checksum", fmt::format("{} (the golden of {})", m.golden.checksum, name(0)),
                        p.golden.checksum);
    if (p.noise.size() != m.noise.size())
      throw_input_error(name(i), "noise runs", fmt::format("{} (as in {})", m.noise.size(), name(0)),
                        fmt::format("{}", p.noise.size()));
    // One floor for the whole comparison: noise run r of every shard is noise run r of the first.
    auto made_by = [](const Partial& x, std::size_t r) {
      return r < x.noise_made_by.size() ? x.noise_made_by[r] : Provenance{};
    };
    for (std::size_t r = 0; r < p.noise.size(); ++r)
      if (!same_run(parts[0].noise_paths[r], made_by(parts[0], r), p.noise_paths[r], made_by(p, r)))
        throw_input_error(
            name(i), fmt::format("noise run {}", r + 1),
            fmt::format("the same noise run as in {}: {} (one floor for every shard: judge each "
                        "shard against the same noise runs, in the same order)",
                        name(0), run_named(parts[0].noise_paths[r], made_by(parts[0], r))),
            run_named(p.noise_paths[r], made_by(p, r)));
    if (!same_run(parts[0].candidate_path, parts[0].candidate_made_by, p.candidate_path,
                  p.candidate_made_by) &&
        !parts[0].candidate_made_by.engine.empty() && !p.candidate_made_by.engine.empty() &&
        parts[0].candidate_made_by.engine != "logits" && p.candidate_made_by.engine != "logits")
      throw_input_error(name(i), "candidate",
                        fmt::format("the candidate of {}: {}", name(0),
                                    run_named(parts[0].candidate_path, parts[0].candidate_made_by)),
                        run_named(p.candidate_path, p.candidate_made_by));
    // The accumulators' shape (a re-sealed shard can lie about it): merge asserts it.
    for (std::size_t r = 0; r <= p.noise.size(); ++r) {
      const JudgeAccumulator& a = r == 0 ? p.cand : p.noise[r - 1];
      const JudgeAccumulator& b = r == 0 ? m.cand : m.noise[r - 1];
      if (a.k != b.k || a.domains != b.domains || a.n_segments != b.n_segments)
        throw_input_error(name(i), fmt::format("metadata run{} k, domains, n_segments", r),
                          fmt::format("k = {}, {} domains, {} segments (as in {})", b.k, b.domains.size(),
                                      b.n_segments, name(0)),
                          fmt::format("k = {}, {} domains, {} segments", a.k, a.domains.size(), a.n_segments));
    }
    // Named here (the accumulator's own check knows no files): a range judged by an earlier shard.
    for (auto& r : p.cand.ranges)
      for (std::size_t j = 0; j < i; ++j)
        for (auto& q : parts[j].cand.ranges)
          if (r.first < q.second && q.first < r.second)
            throw_input_error(name(i), "positions",
                              fmt::format("positions no other shard covers ({} covers [{}, {}))", name(j), q.first,
                                          q.second),
                              fmt::format("[{}, {})", r.first, r.second));
    m.cand.merge(p.cand);
    for (std::size_t r = 0; r < p.noise.size(); ++r) m.noise[r].merge(p.noise[r]);
    // Files recorded in pieces: the report lists every piece.
    append_path(m.candidate_path, p.candidate_path);
    for (std::size_t r = 0; r < p.noise.size(); ++r) append_path(m.noise_paths[r], p.noise_paths[r]);
  }
  return m;
}

}  // namespace kc
