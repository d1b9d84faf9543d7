#include "lab/locate.h"
#include "lab/progress.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/mapped_file.h"
#include "golden/corpus.h"
#include "golden/golden.h"
#include "judge/svg_plot.h"
#include "lab/record_model.h"
#include "lab/trace.h"
#include "metrics/stats.h"
#include "model/causal_lm.h"
#include "model/tokenizer.h"
#include "model/variant.h"

namespace kc {

namespace {

using json = nlohmann::json;

const char* phase_label(int phase) { return phase == 0 ? "prefill" : "decode"; }

bool is_state(std::string_view name) { return name.find("state") != std::string_view::npos; }

// The rows one run's forward reported at the chosen positions: per (layer, name, golden position) and head
// (-1: not per head). A state tensor is stored under the position it stands at (the last prefilled one,
// or the decoded one).
class Capture {
 public:
  using Key = std::tuple<int, std::string, std::int64_t>;
  using Heads = std::map<int, std::vector<float>>;

  Capture(const std::vector<std::string>* names, bool record_order) : names_(names), record_order_(record_order) {}

  // The segment now replayed: golden index of its local position 0; which local positions are chosen.
  void start_segment(std::int64_t start, const std::vector<char>* chosen) { start_ = start, chosen_ = chosen; }
  void state_at(std::int64_t local, bool always) { state_local_ = local, state_always_ = always; }

  void on(const engine::TensorEvent& ev) {
    if (ev.name.ends_with(".chunk")) return;  // a GDN state inside a prefill call, never stored
    std::lock_guard<std::mutex> lock(mu_);
    if (record_order_) {
      auto site = std::pair<int, std::string>(ev.layer, std::string(ev.name));
      if (seen_sites_.insert(site).second) order_.push_back(site);
    }
    if (names_ && !names_->empty() && std::find(names_->begin(), names_->end(), ev.name) == names_->end()) return;
    if (is_state(ev.name)) {
      if (!state_always_ && !(*chosen_)[static_cast<std::size_t>(state_local_)]) return;
      rows_[Key{ev.layer, std::string(ev.name), start_ + state_local_}][ev.head].assign(ev.data.begin(),
                                                                                         ev.data.end());
      return;
    }
    for (std::size_t r = 0; r < ev.rows; ++r) {
      const std::size_t local = ev.pos0 + r;
      if (local >= chosen_->size() || !(*chosen_)[local]) continue;
      auto row = ev.data.subspan(r * ev.cols, ev.cols);
      rows_[Key{ev.layer, std::string(ev.name), start_ + static_cast<std::int64_t>(local)}][ev.head].assign(
          row.begin(), row.end());
    }
  }

  const std::map<Key, Heads>& rows() const { return rows_; }
  const std::vector<std::pair<int, std::string>>& order() const { return order_; }
  void clear() { rows_.clear(); }

 private:
  const std::vector<std::string>* names_;
  bool record_order_;
  std::mutex mu_;
  std::map<Key, Heads> rows_;
  std::set<std::pair<int, std::string>> seen_sites_;
  std::vector<std::pair<int, std::string>> order_;  // data-flow order: first report in the forward
  std::int64_t start_ = 0, state_local_ = 0;
  bool state_always_ = false;
  const std::vector<char>* chosen_ = nullptr;
};

// One segment's replay, as `record` runs it, up to its last chosen position: one prefill call of the first
// min(n_prefill, last + 1) tokens, then decode steps.
void replay(const CausalLM& m, const SegmentReplay& j, const std::vector<char>& chosen, Capture& cap) {
  const auto last = static_cast<std::int64_t>(chosen.size()) - 1;
  const std::int64_t T = std::min(j.n_prefill, last + 1);
  auto st = m.new_state();
  cap.start_segment(j.start, &chosen);
  cap.state_at(T - 1, true);
  m.prefill(*st, std::span<const std::int32_t>(j.window).first(static_cast<std::size_t>(T)),
            [](std::size_t, std::size_t, std::span<const float>) {});  // a sink: the LM head runs ("logits")
  for (std::int64_t p = T; p <= last; ++p) {
    cap.state_at(p, false);
    (void)m.decode(*st, j.window[static_cast<std::size_t>(p)]);
  }
}

// ‖a − b‖ / ‖b‖ over all heads of one position (Σ d² / Σ b²); none when the run's rows are not the
// reference's layout (other heads, another row length: a tensor the run reports in pieces).
std::optional<double> heads_error(const Capture::Heads& a, const Capture::Heads& b) {
  double d2 = 0, b2 = 0;
  if (a.size() != b.size()) return std::nullopt;
  for (const auto& [h, rb] : b) {
    auto it = a.find(h);
    if (it == a.end() || it->second.size() != rb.size()) return std::nullopt;
    double bb = 0;
    for (float x : rb) bb += static_cast<double>(x) * x;
    const double e = relative_l2_error(it->second, rb);
    d2 += std::isinf(e) ? INFINITY : e * e * bb, b2 += bb;
  }
  return b2 == 0 ? (d2 == 0 ? 0.0 : INFINITY) : std::sqrt(d2 / b2);
}

// "layers 0–29, prefill and decode": a note's list of (layer, phase) sites.
std::string sites_text(const std::set<std::pair<int, int>>& sites) {
  std::set<int> layers;
  bool phase[2] = {false, false};
  for (const auto& [layer, p] : sites) layers.insert(layer), phase[p ? 1 : 0] = true;
  std::string list;
  for (auto it = layers.begin(); it != layers.end();) {
    int a = *it, b = a;
    while (++it != layers.end() && *it == b + 1) ++b;
    list += (list.empty() ? "" : ", ") + (a == b ? std::to_string(a) : fmt::format("{}–{}", a, b));
  }
  return fmt::format("{} {}, {}", layers.size() == 1 ? "layer" : "layers", list,
                     phase[0] && phase[1] ? "prefill and decode" : phase_label(phase[0] ? 0 : 1));
}

std::vector<double> flat(const Capture::Heads& h) {
  std::vector<double> v;
  for (const auto& [k, x] : h) v.insert(v.end(), x.begin(), x.end());
  return v;
}

// The dtype a site's tensor has in the variant (what `compare` routes on): bf16 activations under the bf16
// base except those production keeps in f32 (model/variant.h).
DType site_dtype(const Variant& v, const std::string& name) {
  if (!v.bf16_base || name == "attn.p" || name == "logits" || is_state(name)) return DType::float32;
  return DType::bfloat16;
}

std::string figure_text(const CompareResult& c) {
  for (const auto& f : c.figures)
    if (f.limit) return fmt::format("{} {:.3g} {} {:.3g}", f.name, f.value, f.relation, *f.limit);
  return c.reason;
}

}  // namespace

std::vector<SiteTest> test_sites(std::span<const SiteSamples> sites, double alpha, double min_factor) {
  std::vector<SiteTest> out;
  std::vector<double> p;
  for (const SiteSamples& s : sites) {
    SiteTest t;
    KC_ASSERT(s.runs.size() >= 3, "locate: a site needs ≥ 2 noise runs and the candidate");
    const std::size_t m = s.runs.size() - 1, N = s.cluster.size();
    for (const auto& r : s.runs) KC_ASSERT(r.size() == N, "locate: a run's samples differ in number");
    t.samples = N;
    std::map<std::int32_t, std::size_t> cl;
    for (auto c : s.cluster) cl.emplace(c, cl.size());
    t.clusters = cl.size();
    // x[r][j]: run r's log errors summed over cluster j, / N (so Σ_j x_rj = M_r, the run's mean log error).
    std::vector<std::vector<double>> x(m + 1, std::vector<double>(cl.size(), 0.0));
    std::vector<double> M(m + 1, 0.0);
    for (std::size_t r = 0; r <= m; ++r)
      for (std::size_t i = 0; i < N; ++i) {
        const double l = std::log(std::max(s.runs[r][i], 1e-30)) / static_cast<double>(std::max<std::size_t>(N, 1));
        x[r][cl[s.cluster[i]]] += l, M[r] += l;
      }
    double Mbar = 0;
    for (std::size_t r = 0; r < m; ++r) Mbar += M[r] / static_cast<double>(m);
    double v_seg = 0;  // Σ_j var over the noise runs of x_rj (ddof 1): Var(M) with clusters independent
    for (std::size_t j = 0; j < cl.size(); ++j) {
      double mu = 0, ss = 0;
      for (std::size_t r = 0; r < m; ++r) mu += x[r][j] / static_cast<double>(m);
      for (std::size_t r = 0; r < m; ++r) ss += (x[r][j] - mu) * (x[r][j] - mu);
      v_seg += ss / static_cast<double>(m - 1);
    }
    const double D = M[m] - Mbar;
    t.cand = std::exp(M[m]), t.floor = std::exp(Mbar), t.ratio = std::exp(D);
    for (std::size_t r = 0; r < m; ++r) t.noise.push_back(std::exp(M[r]));
    t.sd = std::sqrt((1.0 + 1.0 / static_cast<double>(m)) * v_seg);
    t.df = static_cast<double>(cl.size() * (m - 1));
    if (N == 0 || !std::isfinite(D)) {
      t.t = 0, t.p_value = 1;
    } else if (t.sd == 0) {
      t.t = D > 0 ? INFINITY : D < 0 ? -INFINITY : 0;
      t.p_value = D > 0 ? 0 : 1;
    } else {
      t.t = D / t.sd;
      t.p_value = 1 - student_t_cdf(t.t, t.df);
    }
    p.push_back(t.p_value);
    out.push_back(std::move(t));
  }
  const std::vector<bool> rej = holm_reject(p, alpha);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].rejected = rej[i];
    out[i].departs = rej[i] && out[i].ratio >= min_factor;
  }
  return out;
}

std::vector<std::int64_t> select_positions(const Golden& g, const std::string& spec, const std::string& report,
                                           std::uint64_t seed) {
  const std::int64_t N = g.meta.n;
  auto bad = [&](const std::string& why) -> std::vector<std::int64_t> {
    fail("--positions: expected worst:N, random:N or A:B (golden indices, 0 ≤ A < B ≤ {}), got {}{}", N, spec, why);
  };
  auto count = [&](std::string_view s) -> std::int64_t {
    std::int64_t v = 0;
    if (s.empty() || s.size() > 12 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      bad("");
    for (char c : s) v = v * 10 + (c - '0');
    return v;
  };
  auto random_sample = [&](std::int64_t n, const std::set<std::int64_t>& taken) {
    std::vector<std::int64_t> pool;
    for (std::int64_t i = 0; i < N; ++i)
      if (!taken.count(i)) pool.push_back(i);
    std::mt19937_64 rng(seed);
    std::shuffle(pool.begin(), pool.end(), rng);
    pool.resize(static_cast<std::size_t>(std::min<std::int64_t>(n, static_cast<std::int64_t>(pool.size()))));
    return pool;
  };
  std::set<std::int64_t> out;
  const auto colon = spec.find(':');
  if (colon == std::string::npos) return bad("");
  const std::string head = spec.substr(0, colon), tail = spec.substr(colon + 1);
  if (head == "random") {
    const std::int64_t n = count(tail);
    if (n < 1) bad(" (N ≥ 1)");
    for (auto p : random_sample(n, {})) out.insert(p);
  } else if (head == "worst") {
    const std::int64_t n = count(tail);
    if (n < 1) bad(" (N ≥ 1)");
    if (report.empty())
      fail("--positions worst:{}: expected --report JUDGE.json (the candidate's `kerncheck test --json` report, "
           "whose \"worst\" list names the positions), got none",
           n);
    json j;
    try {
      j = json::parse(read_text_file(report, kConfigTextCap, "a judge report"));
    } catch (const json::exception& e) {
      throw_input_error(report, "JSON", "a `kerncheck test --json` report", e.what());
    }
    if (!j.is_object() || !j.contains("worst") || !j["worst"].is_array())
      throw_input_error(report, "worst", "an array of positions (a `kerncheck test --json` report)",
                        j.is_object() && j.contains("worst") ? j["worst"].type_name() : "absent");
    // A report that stops short of N worst positions while it judged more would silently give fewer.
    const auto kept = static_cast<std::int64_t>(j["worst"].size());
    const std::int64_t judged =
        j.contains("positions_judged") && j["positions_judged"].is_number_integer() ? j["positions_judged"].get<std::int64_t>() : kept;
    if (kept < n && judged > kept)
      throw_input_error(report, "worst",
                        fmt::format("at least {} worst positions for --positions worst:{} (judge with `kerncheck test "
                                    "... --worst {} --json`)",
                                    n, n, n),
                        fmt::format("{} of the {} positions judged", kept, judged));
    for (std::size_t i = 0; i < j["worst"].size() && static_cast<std::int64_t>(out.size()) < n; ++i) {
      const json& w = j["worst"][i];
      if (!w.is_object() || !w.contains("position") || !w["position"].is_number_integer() ||
          w["position"].get<std::int64_t>() < 0 || w["position"].get<std::int64_t>() >= N)
        throw_input_error(report, fmt::format("worst[{}].position", i),
                          fmt::format("an integer in [0, {}) (a position of {})", N, g.path),
                          w.is_object() && w.contains("position") ? w["position"].dump() : "absent");
      out.insert(w["position"].get<std::int64_t>());
    }
    for (auto p : random_sample(std::max<std::int64_t>(n / 4, 8), out)) out.insert(p);
  } else {
    const std::int64_t a = count(head), b = count(tail);
    if (a >= b || b > N) bad("");
    for (std::int64_t i = a; i < b; ++i) out.insert(i);
  }
  return {out.begin(), out.end()};
}

LocateResult run_locate(const LocateOptions& o) {
  const Variant cand = parse_variant(o.variant, "--variant");
  std::vector<Variant> noise;
  for (const auto& s : o.noise) noise.push_back(parse_variant(s, "--noise-variant"));
  if (noise.size() < 2)
    fail("--noise-variant: expected at least 2 noise variants (equally correct implementations, e.g. bf16 and "
         "bf16+order=1), got {}",
         noise.size());
  for (std::size_t a = 0; a < noise.size(); ++a)
    for (std::size_t b = 0; b < a; ++b)
      if (to_string(noise[a]) == to_string(noise[b]))
        fail("--noise-variant: expected distinct noise variants, got {} twice", to_string(noise[a]));
  if (!(o.alpha > 0 && o.alpha < 1)) fail("--alpha: expected a level in (0, 1), got {}", o.alpha);
  if (!(o.min_factor >= 1)) fail("--min-factor: expected a factor ≥ 1, got {}", o.min_factor);
  if (o.cluster_positions < 0)
    fail("--cluster-positions: expected 0 (one cluster per segment) or a block size ≥ 1, got {}", o.cluster_positions);
  if (o.positions.empty()) fail("--positions: expected at least one position, got none");
  for (const auto& n : o.tensors)
    if (n.empty()) fail("--tensors: expected comma-separated hook names (docs/engine.md), got an empty name");

  LocateResult res;
  res.model = o.model, res.golden = o.golden, res.variant = to_string(cand);
  for (const auto& v : noise) res.noise.push_back(to_string(v));
  res.alpha = o.alpha, res.min_factor = o.min_factor;

  Golden g = read_golden(o.golden);
  Tokenizer tok = load_tokenizer(tokenizer_source(o.model, o.tokenizer));
  std::unique_ptr<CausalLM> ref_model = load_causal_lm(o.model);
  check_vocab_size(tok, ref_model->vocab_size(), o.model, !is_gguf_model(o.model));
  check_golden_model(g, o.model, model_identity(o.model), tokenizer_identity(tok), o.allow_other_model);
  const auto V = static_cast<std::int64_t>(ref_model->vocab_size());
  if (V != g.meta.vocab)
    throw_input_error(o.model, "vocab", fmt::format("{} (the golden's)", g.meta.vocab), std::to_string(V));
  const std::vector<SegmentReplay> jobs = golden_replays(g, V);

  // Chosen local positions per segment (a segment without any is not replayed).
  std::map<std::int32_t, std::vector<char>> chosen;
  for (std::int64_t p : o.positions) {
    if (p < 0 || p >= g.meta.n)
      fail("--positions: expected golden indices in [0, {}), got {}", g.meta.n, p);
    const SegmentReplay& j = jobs[static_cast<std::size_t>(g.a.segment[p])];
    std::vector<char>& c = chosen[j.index];
    const auto local = static_cast<std::size_t>(p - j.start);
    if (c.size() <= local) c.resize(local + 1, 0);
    if (!c[local]) ++res.positions[g.a.phase[p] == 0 ? 0 : 1];
    c[local] = 1;
  }
  res.segments = chosen.size();

  // Every run (the f32 reference, the noise runs, the candidate) replays the chosen segments: minutes for a
  // few hundred positions, so the replays report progress.
  std::int64_t per_run = 0;
  for (const auto& [seg, c] : chosen) per_run += static_cast<std::int64_t>(c.size());
  const std::size_t n_runs = noise.size() + 2;
  Progress prog("locate: segment replay", chosen.size() * n_runs, per_run * static_cast<std::int64_t>(n_runs));
  auto replay_all = [&](const CausalLM& m, Capture& cap, std::size_t run, const std::string& name) {
    for (const auto& [seg, c] : chosen) {
      replay(m, jobs[static_cast<std::size_t>(seg)], c, cap);
      prog.done(static_cast<std::int64_t>(c.size()), false, fmt::format(" (run {}/{}, {})", run, n_runs, name));
    }
  };

  // The reference's rows, kept; then each run's, compared with them and dropped.
  Capture ref(&o.tensors, true);
  {
    auto usage = apply_variant(*ref_model, Variant{}, [&](const engine::TensorEvent& ev) { ref.on(ev); });
    replay_all(*ref_model, ref, 1, "f32 reference");
    ref_model->set_hook(nullptr);
  }
  for (const auto& n : o.tensors)
    if (std::none_of(ref.order().begin(), ref.order().end(), [&](auto& s) { return s.second == n; })) {
      std::set<std::string> names;
      for (const auto& s : ref.order()) names.insert(s.second);
      std::string list;
      for (const auto& s : names) list += (list.empty() ? "" : ", ") + s;
      fail("--tensors: {}: expected a tensor the model reports (docs/engine.md), got none of that name; its "
           "tensors: {}",
           n, list);
    }

  // Sites: (layer, name) in data-flow order × phase; samples in the reference's key order.
  using SiteKey = std::tuple<int, std::string, int>;
  std::map<SiteKey, std::vector<Capture::Key>> site_keys;
  for (const auto& [key, heads] : ref.rows()) {
    const auto& [layer, name, pos] = key;
    site_keys[{layer, name, g.a.phase[pos] == 0 ? 0 : 1}].push_back(key);
  }
  std::vector<SiteKey> sites;
  for (int phase : {0, 1})
    for (const auto& [layer, name] : ref.order())
      if (site_keys.count({layer, name, phase})) sites.push_back({layer, name, phase});
  std::vector<SiteSamples> samples(sites.size());
  for (std::size_t s = 0; s < sites.size(); ++s) {
    for (const auto& key : site_keys[sites[s]]) {
      const std::int64_t pos = std::get<2>(key), seg = g.a.segment[pos];
      const std::int64_t block = o.cluster_positions > 0 ? (pos - jobs[static_cast<std::size_t>(seg)].start) / o.cluster_positions : 0;
      samples[s].cluster.push_back(static_cast<std::int32_t>(seg * 1'000'000 + block));
    }
    samples[s].runs.resize(noise.size() + 1);
  }
  std::vector<SiteVerdicts> verdicts(sites.size());
  std::vector<Method> methods(sites.size());
  for (std::size_t s = 0; s < sites.size(); ++s) {
    const DType dt = site_dtype(cand, std::get<1>(sites[s]));
    RouteRequest rq;
    rq.output_dtype = dt, rq.cli_method = o.compare;
    methods[s] = route(rq).method;
    verdicts[s].method = method_name(methods[s]);
  }

  // compared[s][r]: run r's rows at site s have the reference's layout (else left out there, with a note).
  std::vector<std::vector<char>> compared(sites.size(), std::vector<char>(noise.size() + 1, 1));
  std::map<std::tuple<std::string, std::string, std::string>, std::set<std::pair<int, int>>> left_out;
  std::map<std::string, std::set<std::pair<int, int>>> untested;  // by tensor: (layer, phase)
  std::unique_ptr<CausalLM> bf16_model;
  std::vector<const Variant*> runs;
  for (const auto& v : noise) runs.push_back(&v);
  runs.push_back(&cand);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Variant& v = *runs[r];
    const char* field = r < noise.size() ? "--noise-variant" : "--variant";
    CausalLM* m = ref_model.get();
    if (v.bf16_base) {  // the bf16 weights once, for every bf16 run (rounding is idempotent)
      if (!bf16_model) bf16_model = load_causal_lm(o.model);
      m = bf16_model.get();
    }
    Capture cap(&o.tensors, false);
    auto usage = apply_variant(*m, v, [&](const engine::TensorEvent& ev) { cap.on(ev); });
    replay_all(*m, cap, r + 2, to_string(v));
    m->set_hook(nullptr);
    usage->check(field);
    for (std::size_t s = 0; s < sites.size(); ++s) {
      std::vector<double> a, b;
      for (const auto& key : site_keys[sites[s]]) {
        auto it = cap.rows().find(key);
        const auto& rh = ref.rows().at(key);
        const std::optional<double> e = it == cap.rows().end() ? std::nullopt : heads_error(it->second, rh);
        if (!e) {  // not held whole by this run (flash attention's P): no figure, not a failed replay
          left_out[{std::get<1>(sites[s]), to_string(v),
                    it == cap.rows().end() ? "does not report it"
                                           : "reports it in pieces of another layout than the reference's"}]
              .insert({std::get<0>(sites[s]), std::get<2>(sites[s])});
          compared[s][r] = 0;
          samples[s].runs[r].clear(), a.clear(), b.clear();
          break;
        }
        samples[s].runs[r].push_back(*e);
        if (o.verdicts) {
          auto x = flat(it->second), y = flat(rh);
          a.insert(a.end(), x.begin(), x.end()), b.insert(b.end(), y.begin(), y.end());
        }
      }
      if (!o.verdicts) continue;
      if (!compared[s][r]) {
        if (r < noise.size()) verdicts[s].noise_pass.push_back(false);  // keeps the runs' order; dropped below
        continue;
      }
      const DType dt = site_dtype(cand, std::get<1>(sites[s]));
      const auto n = static_cast<std::int64_t>(a.size());
      Tensor ta = make_tensor_f64(dt, {n}, a, "run"), tb = make_tensor_f64(dt, {n}, b, "reference");
      Route route_s;
      route_s.method = methods[s];
      CompareInputs in;
      in.actual = &ta, in.golden = &tb;
      CompareResult c = compare(in, route_s);
      if (r < noise.size())
        verdicts[s].noise_pass.push_back(c.pass);
      else
        verdicts[s].cand_pass = c.pass, verdicts[s].cand_detail = figure_text(c);
    }
  }

  // A site keeps the runs that could be compared there; it is tested when the candidate and ≥ 2 noise
  // runs could.
  std::vector<std::size_t> tested;
  std::vector<SiteSamples> kept;
  std::vector<std::vector<std::size_t>> kept_noise(sites.size());
  for (std::size_t s = 0; s < sites.size(); ++s) {
    for (std::size_t r = 0; r < noise.size(); ++r)
      if (compared[s][r]) kept_noise[s].push_back(r);
    if (!compared[s][noise.size()] || kept_noise[s].size() < 2) {
      untested[std::get<1>(sites[s])].insert({std::get<0>(sites[s]), std::get<2>(sites[s])});
      continue;
    }
    SiteSamples k;
    k.cluster = samples[s].cluster;
    for (std::size_t r : kept_noise[s]) k.runs.push_back(std::move(samples[s].runs[r]));
    k.runs.push_back(std::move(samples[s].runs[noise.size()]));
    if (o.verdicts && kept_noise[s].size() < noise.size()) {
      std::vector<bool> np;
      for (std::size_t i = 0; i < kept_noise[s].size(); ++i) np.push_back(verdicts[s].noise_pass[kept_noise[s][i]]);
      verdicts[s].noise_pass = np;
    }
    tested.push_back(s), kept.push_back(std::move(k));
  }
  for (const auto& [what, where] : left_out)
    res.notes.push_back(fmt::format("{} ({}): {} {}: left out for that run", std::get<0>(what), sites_text(where),
                                    std::get<1>(what), std::get<2>(what)));
  for (const auto& [name, where] : untested)
    res.notes.push_back(fmt::format("{} ({}): not tested (the candidate and at least 2 noise runs must report it as "
                                    "the reference does)",
                                    name, sites_text(where)));
  const std::vector<SiteTest> tests = test_sites(kept, o.alpha, o.min_factor);
  res.family = tests.size();
  for (std::size_t i = 0; i < tested.size(); ++i) {
    const std::size_t s = tested[i];
    LocateSite ls;
    std::tie(ls.layer, ls.name, ls.phase) = sites[s];
    ls.test = tests[i];
    for (std::size_t r : kept_noise[s]) ls.noise_runs.push_back(res.noise[r]);
    if (o.verdicts) ls.verdicts = verdicts[s];
    if (ls.test.departs && res.first[ls.phase] < 0) res.first[ls.phase] = static_cast<int>(res.sites.size());
    res.sites.push_back(std::move(ls));
  }
  return res;
}

namespace {

std::string layer_text(int layer) { return layer < 0 ? std::string("-") : std::to_string(layer); }

std::string site_line(const LocateSite& s) {
  std::string v;
  if (s.verdicts) {
    v = fmt::format("  {} {}", s.verdicts->method, s.verdicts->cand_pass ? "pass" : "FAIL");
    std::string nv;
    for (bool b : s.verdicts->noise_pass) nv += (nv.empty() ? "" : "/") + std::string(b ? "pass" : "FAIL");
    v += fmt::format(" (noise {})", nv);
  }
  return fmt::format("{:>5}  {:<12} {:>9.3e} {:>9.3e} {:>8.3g} {:>9.2e} {:>4}{}\n", layer_text(s.layer), s.name,
                     s.test.cand, s.test.floor, s.test.ratio, s.test.p_value, s.test.departs ? "<<" : "", v);
}

}  // namespace

std::string locate_text(const LocateResult& r) {
  std::string noise;
  for (const auto& n : r.noise) noise += (noise.empty() ? "" : ", ") + n;
  std::string s = fmt::format(
      "kerncheck locate: {}\ngolden {}; candidate {} against reference {}; noise {}\n"
      "{} prefill + {} decode positions from {} segments; {} sites; a site departs when Holm rejects "
      "(one-sided t on the mean log error, family-wise alpha {}) and the error is >= {} x the floor\n",
      r.model, r.golden, r.variant, r.reference, noise, r.positions[0], r.positions[1], r.segments, r.family,
      r.alpha, r.min_factor);
  for (const auto& n : r.notes) s += "note: " + n + "\n";
  const std::string head = fmt::format("{:>5}  {:<12} {:>9} {:>9} {:>8} {:>9}\n", "layer", "tensor", "cand",
                                       "floor", "ratio", "p");
  for (int phase : {0, 1}) {
    if (r.positions[phase] == 0) continue;
    std::vector<const LocateSite*> ss;
    for (const auto& x : r.sites)
      if (x.phase == phase) ss.push_back(&x);
    if (r.first[phase] < 0) {
      s += fmt::format("\n{}: no site leaves the floor. Largest ratios (geometric-mean relative error vs the "
                       "f32 reference):\n",
                       phase_label(phase));
      std::vector<const LocateSite*> top = ss;
      std::sort(top.begin(), top.end(), [](auto* a, auto* b) { return a->test.ratio > b->test.ratio; });
      top.resize(std::min<std::size_t>(top.size(), 5));
      s += head;
      for (auto* x : top) s += site_line(*x);
      continue;
    }
    const LocateSite& f = r.sites[static_cast<std::size_t>(r.first[phase])];
    s += fmt::format("\n{}: first site outside the floor: layer {} {} (error {:.3e} vs floor {:.3e}, {:.3g} x, "
                     "p {:.2e})\nfrom there on, in data-flow order (<< = departs):\n",
                     phase_label(phase), layer_text(f.layer), f.name, f.test.cand, f.test.floor, f.test.ratio,
                     f.test.p_value);
    s += head;
    bool on = false;
    for (auto* x : ss) {
      on = on || x == &f;
      if (on) s += site_line(*x);
    }
  }
  return s;
}

std::string locate_json(const LocateResult& r) {
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  json j;
  j["format"] = "kerncheck.locate", j["version"] = 1;
  j["model"] = r.model, j["golden"] = r.golden, j["variant"] = r.variant, j["reference"] = r.reference;
  j["noise"] = r.noise, j["alpha"] = r.alpha, j["min_factor"] = r.min_factor;
  j["positions"] = {{"prefill", r.positions[0]}, {"decode", r.positions[1]}};
  j["segments"] = r.segments, j["family"] = r.family;
  if (!r.html.empty()) j["html"] = r.html;  // where `kerncheck test --locate` links
  j["notes"] = r.notes;
  j["first"] = json::object();
  for (int phase : {0, 1}) {
    if (r.first[phase] < 0) {
      j["first"][phase_label(phase)] = nullptr;
      continue;
    }
    const auto& f = r.sites[static_cast<std::size_t>(r.first[phase])];
    j["first"][phase_label(phase)] = {{"layer", f.layer}, {"name", f.name}, {"ratio", num(f.test.ratio)}};
  }
  j["sites"] = json::array();
  for (const auto& s : r.sites) {
    json n = json::array();
    for (double x : s.test.noise) n.push_back(num(x));
    json e = {{"layer", s.layer},      {"name", s.name},           {"phase", phase_label(s.phase)},
              {"samples", s.test.samples}, {"clusters", s.test.clusters}, {"cand", num(s.test.cand)},
              {"floor", num(s.test.floor)}, {"noise", n},             {"ratio", num(s.test.ratio)},
              {"sd_log", num(s.test.sd)},  {"df", s.test.df},          {"t", num(s.test.t)},
              {"p_value", num(s.test.p_value)}, {"rejected", s.test.rejected}, {"departs", s.test.departs},
              {"noise_runs", s.noise_runs}};
    if (s.verdicts) {
      e["compare"] = {{"method", s.verdicts->method},
                      {"cand_pass", s.verdicts->cand_pass},
                      {"cand", s.verdicts->cand_detail},
                      {"noise_pass", s.verdicts->noise_pass}};
    }
    j["sites"].push_back(std::move(e));
  }
  return j.dump(2) + "\n";
}

std::string locate_html(const LocateResult& r) {
  std::string h = svg::table_page_head("kerncheck locate");
  h += fmt::format("<h1>kerncheck locate</h1>\n<p>model {} · golden {} · candidate <b>{}</b> · noise ",
                   svg::escape(r.model), svg::escape(r.golden), svg::escape(r.variant));
  for (std::size_t i = 0; i < r.noise.size(); ++i) h += (i ? ", " : "") + svg::escape(r.noise[i]);
  h += "</p>\n";
  for (const auto& n : r.notes) h += "<p class=\"note\">note: " + svg::escape(n) + "</p>\n";
  for (int phase : {0, 1}) {
    if (r.positions[phase] == 0) continue;
    if (r.first[phase] < 0)
      h += fmt::format("<h2>{}: no site leaves the floor</h2>\n", phase_label(phase));
    else {
      const auto& f = r.sites[static_cast<std::size_t>(r.first[phase])];
      h += fmt::format("<h2>{}: first site outside the floor: layer {} {} ({:.3g} ×)</h2>\n", phase_label(phase),
                       layer_text(f.layer), svg::escape(f.name), f.test.ratio);
    }
    std::vector<std::string> names;
    for (const auto& s : r.sites)
      if (s.phase == phase && s.layer >= 0 && std::find(names.begin(), names.end(), s.name) == names.end())
        names.push_back(s.name);
    for (const auto& name : names) {
      svg::Plot p;
      p.title = fmt::format("{} ({})", name, phase_label(phase));
      p.id = fmt::format("locate-{}-{}", phase_label(phase), name);
      p.x = {"layer", svg::Scale::linear};
      p.y = {"relative error vs f32 (geometric mean)", svg::Scale::log10};
      svg::Series band, cand, dep;
      band.name = "noise runs (min … max)", band.mark = svg::Mark::band, band.color = "#bbbbbb";
      cand.name = "candidate", cand.mark = svg::Mark::line;
      dep.name = "departs", dep.mark = svg::Mark::points, dep.color = "#D55E00", dep.css_class = "departs";
      dep.radius = 4;
      for (const auto& s : r.sites) {
        if (s.phase != phase || s.name != name || s.layer < 0) continue;
        const auto [lo, hi] = std::minmax_element(s.test.noise.begin(), s.test.noise.end());
        band.x.push_back(s.layer), band.y_lo.push_back(*lo), band.y_hi.push_back(*hi), band.y.push_back(s.test.floor);
        cand.x.push_back(s.layer), cand.y.push_back(s.test.cand);
        if (s.test.departs) dep.x.push_back(s.layer), dep.y.push_back(s.test.cand);
      }
      p.series = {band, cand};
      if (!dep.x.empty()) p.series.push_back(dep);
      h += svg::render(p) + "\n";
    }
  }
  h += "</body></html>\n";
  return h;
}

}  // namespace kc
