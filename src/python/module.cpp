// kerncheck._core: the Python extension (nanobind). A thin layer: every method, routing rule, metric and
// file format lives in the C++ layers below; this file only turns Python arguments into their inputs and
// their results into JSON text or numpy arrays (docs/python.md). kc::Error becomes kerncheck.Error, a
// ValueError; an unsupported dtype or layout is a TypeError or ValueError raised before any C++ runs.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "compare/compare.h"
#include "compare/methods.h"
#include "compare/report.h"
#include "compare/spec.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/suggest.h"
#include "golden/corpus.h"
#include "golden/golden.h"
#include "golden/record_topk.h"
#include "judge/judge.h"
#include "judge/judge_html.h"
#include "judge/options.h"
#include "judge/pipeline.h"
#include "lab/locate.h"
#include "lab/record_model.h"
#include "numeric/formats.h"
#include "opmode/cases.h"
#include "opmode/registry.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kc::py {
namespace {

using Bytes = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
// (bytes of the C-contiguous buffer, dtype name, shape, origin, packed): the Python side views any
// numpy array or CPU torch tensor as uint8 without copying. packed = false for 4-bit types stored one
// element per byte (ml_dtypes int4 / float4_e2m1fn); they are packed here (a copy, half the size).
using TensorArg = std::tuple<Bytes, std::string, std::vector<std::int64_t>, std::string, bool>;

template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T> v, std::vector<std::size_t> shape) {
  auto* p = new std::vector<T>(std::move(v));
  nb::capsule owner(p, [](void* x) noexcept { delete static_cast<std::vector<T>*>(x); });
  return nb::ndarray<nb::numpy, T>(p->data(), shape.size(), shape.data(), owner);
}

DType dtype_or_type_error(const std::string& name, const std::string& what) {
  auto d = parse_dtype(name);
  if (!d)
    throw nb::type_error(fmt::format("{}: dtype: expected one kerncheck reads ({}), got unsupported dtype {}", what,
                                     dtype_names_list(), name)
                             .c_str());
  return *d;
}

// A kc::Tensor over the Python buffer (no copy; valid while the call runs), or over a packed copy for
// unpacked 4-bit arrays. `as` reinterprets raw 8-bit codes (uint8/int8 arrays) as another 8-bit dtype.
Tensor tensor_view(const TensorArg& arg, const std::optional<std::string>& as, const char* role) {
  const auto& [bytes, dtype_name_, shape, origin, packed] = arg;
  DType d = dtype_or_type_error(dtype_name_, fmt::format("{} ({})", role, origin));
  if (as) {
    DType want = dtype_or_type_error(*as, "dtype");
    if (want != d) {
      bool raw_codes = (d == DType::uint8 || d == DType::int8) && dtype_info(want).bits == 8;
      if (!raw_codes)
        throw nb::value_error(fmt::format("{} ({}): dtype: expected {} (the array's own dtype), or raw "
                                          "uint8/int8 codes to read as an 8-bit dtype, got an array of {}",
                                          role, origin, dtype_name(want), dtype_name(d))
                                  .c_str());
      d = want;
    }
  }
  Tensor t;
  t.dtype = d;
  t.shape = shape;
  t.origin = origin;
  std::size_t n = t.numel();
  std::span<const std::uint8_t> b(bytes.data(), bytes.size());
  if (is_packed4(d) && !packed) {
    if (b.size() != n)
      throw nb::value_error(fmt::format("{} ({}): expected {} bytes (one 4-bit value per byte), got {}", role,
                                        origin, n, b.size())
                                .c_str());
    auto buf = std::make_shared<std::vector<std::uint8_t>>(storage_bytes(d, n), 0);
    for (std::size_t i = 0; i < n; ++i) (*buf)[i / 2] |= static_cast<std::uint8_t>((b[i] & 0xF) << (i % 2 * 4));
    t.bytes = *buf;
    t.owner = buf;
    return t;
  }
  if (b.size() != storage_bytes(d, n))
    throw nb::value_error(fmt::format("{} ({}): expected {} bytes for {} elements of {}, got {}", role, origin,
                                      storage_bytes(d, n), n, dtype_name(d), b.size())
                              .c_str());
  t.bytes = b;
  return t;
}

std::optional<Method> method_or_error(const std::optional<std::string>& m) {
  if (!m) return std::nullopt;
  auto r = parse_method(*m);
  if (!r)
    throw nb::value_error(
        fmt::format("method: expected one of {}, got {}{}", cli_method_names(), *m, method_suggestion(*m)).c_str());
  return r;
}

// A spec lookup over TOML text (a --spec file, or the TOML the Python side writes from TestSpec classes).
SpecLookup spec_lookup(const std::optional<std::string>& toml, const std::string& label) {
  if (!toml) return {};
  auto spec = std::make_shared<Spec>(parse_spec(*toml, label));
  return [spec](const std::string& op, RouteRequest& req) {
    if (const SpecEntry* e = spec->find(op, req.output_dtype)) {
      req.spec_method = e->method;
      req.spec_where = e->where;
      req.spec_tol = e->tol;
    }
  };
}

std::tuple<std::string, std::string, bool> compare_py(const TensorArg& actual, const TensorArg& golden,
                                                      const std::optional<TensorArg>& third,
                                                      const std::optional<std::string>& method,
                                                      const std::optional<std::string>& dtype,
                                                      const std::optional<std::string>& spec_toml,
                                                      const std::string& spec_label,
                                                      const std::optional<std::string>& op,
                                                      std::optional<double> rtol, std::optional<double> atol,
                                                      const std::string& name) {
  Tensor a = tensor_view(actual, dtype, "actual");
  Tensor g = tensor_view(golden, dtype, "golden");
  std::optional<Tensor> b;
  if (third) b = tensor_view(*third, dtype, "third");
  RouteRequest req;
  req.output_dtype = a.dtype;
  req.cli_method = method_or_error(method);
  if (spec_toml) {
    if (!op) throw nb::value_error("op: expected the operator to look up in the spec, got none");
    spec_lookup(spec_toml, spec_label)(*op, req);
  }
  // torch.testing.assert_close-style rtol/atol: both or neither. Without a method they mean torch's rule,
  // every element within atol + rtol·|g| (NaN equal to NaN): close with ptol 0.
  if (rtol.has_value() != atol.has_value())
    throw nb::value_error("rtol, atol: expected both or neither (as torch.testing.assert_close), got one");
  const bool torch_rule = rtol && !req.cli_method;
  if (torch_rule) req.cli_method = Method::close;
  Route r = route(req);
  if (torch_rule && r.method == Method::close) {
    r.source = "rtol, atol arguments (torch.testing.assert_close rule: close, ptol 0)";
    r.tol.ptol = 0.0;
  }
  if (rtol) {
    if (!(*rtol >= 0) || !(*atol >= 0))
      throw nb::value_error(fmt::format("rtol, atol: expected finite values ≥ 0, got {}, {}", *rtol, *atol).c_str());
    const auto reads = [](const MethodDef& m, std::string_view k) {
      return std::find(m.keys.begin(), m.keys.end(), k) != m.keys.end();
    };
    if (!reads(method_def(r.method), "rtol") || !reads(method_def(r.method), "atol")) {
      std::string readers;  // "mixed, close"
      for (const MethodDef* m : methods())
        if (reads(*m, "rtol") && reads(*m, "atol")) readers += (readers.empty() ? "" : ", ") + std::string(m->name);
      throw nb::value_error(fmt::format("rtol, atol: expected a method that reads them ({}), got {} (routed by {})",
                                        readers, method_name(r.method), r.source)
                                .c_str());
    }
    r.tol.rtol = *rtol;
    r.tol.atol = *atol;
    if (!torch_rule) r.source += " (rtol, atol given)";
  }
  CompareResult res = compare(CompareInputs{&a, &g, b ? &*b : nullptr}, r);
  CaseResult cr{name, std::move(res)};
  return {render_json({cr}), render_text(cr), cr.result.pass};
}

// assert_close's torch-style headline: (numel, mismatched, max_abs, its flat index, max_rel, its flat index).
std::tuple<std::size_t, std::size_t, double, std::size_t, double, std::size_t> extremes_py(
    const TensorArg& actual, const TensorArg& golden, double rtol, double atol, bool equal_nan) {
  Tensor a = tensor_view(actual, std::nullopt, "actual");
  Tensor g = tensor_view(golden, std::nullopt, "golden");
  Extremes e = extremes(a, g, rtol, atol, equal_nan);
  return {e.numel, e.mismatched, e.max_abs, e.max_abs_index, e.max_rel, e.max_rel_index};
}

// ---- op plugins: Python functions as candidates of the built-in ops ----------------------------------

// Candidates registered from Python, by "op\x1fname"; the registry's entry looks the callable up here at
// call time, so registering a name again replaces the function. Leaked on purpose: the registry outlives
// the interpreter, and its entries must not decref Python objects after finalisation.
std::map<std::string, PyObject*>& py_candidates() {
  static auto* m = new std::map<std::string, PyObject*>();
  return *m;
}

void register_candidate(const std::string& op, const std::string& name, nb::object fn,
                        const std::string& summary) {
  ops::OpDef* def = const_cast<ops::OpDef*>(ops::registry().find(op));
  if (!def)
    throw nb::value_error(
        fmt::format("op: expected a built-in op ({}), got {}", ops::registry().names_text(), op).c_str());
  if (!PyCallable_Check(fn.ptr())) throw nb::type_error("candidate: expected a callable");
  const std::string key = op + '\x1f' + name;
  auto& table = py_candidates();
  bool fresh = !table.count(key);
  if (fresh && def->candidates.count(name))
    throw nb::value_error(fmt::format("candidate: expected a name that is not a built-in candidate of {}, got {}", op, name).c_str());
  if (!fresh) Py_DECREF(table[key]);
  table[key] = fn.inc_ref().ptr();
  if (!fresh) return;
  ops::ShapeFn shape_of = def->output_shape;
  ops::registry().add_candidate(
      op, name,
      [key, name, op, shape_of](std::span<const ops::Array> inputs, const ops::Params& p, DType out) {
        nb::gil_scoped_acquire gil;
        nb::list args;
        std::vector<ops::Shape> shapes;
        for (const auto& a : inputs) {
          std::vector<std::size_t> sh(a.shape.begin(), a.shape.end());
          args.append(to_numpy(a.values, sh));
          shapes.push_back(a.shape);
        }
        nb::dict params;
        for (const auto& [k, v] : p.values) params[k.c_str()] = v;
        nb::object fn = nb::borrow(py_candidates().at(key));
        nb::object y = fn(args, params, dtype_name(out));
        auto arr = nb::cast<nb::ndarray<const double, nb::c_contig, nb::device::cpu>>(y);
        ops::Shape want = shape_of(shapes, p);
        ops::Shape got;
        for (std::size_t i = 0; i < arr.ndim(); ++i) got.push_back(static_cast<std::int64_t>(arr.shape(i)));
        if (got != want)
          fail("{} candidate {}: output shape: expected {}, got {}", op, name, ops::shape_text(want),
               ops::shape_text(got));
        return ops::Array{want, std::vector<double>(arr.data(), arr.data() + arr.size())};
      },
      summary.empty() ? "Python plugin" : summary);
}

nlohmann::json case_json(const CaseOutcome& o) {
  auto j = nlohmann::json::parse(render_json({CaseResult{o.c.name, o.result}}))["cases"][0];
  j["where"] = o.c.where();
  j["kind"] = o.c.op_mode ? "op" : "files";
  j["describe"] = o.tensors.describe;
  if (o.c.op_mode) {
    j["op"] = o.c.op;
    j["candidate"] = o.c.candidate;
    j["reference"] = o.c.reference.empty() ? std::string("f64") : o.c.reference;
    j["seed"] = o.c.seed;
  } else {
    j["actual"] = o.c.actual;
    j["golden"] = o.c.golden;
  }
  return j;
}

// `kerncheck compare -i CASES.csv` with a spec from the plugin: the CLI's runner and report, case by case
// (on_case(text, json) after each, so a bad case later still leaves the earlier ones printed).
std::tuple<std::string, std::string, int, int> run_cases_py(const std::string& csv,
                                                            const std::optional<std::string>& method,
                                                            const std::optional<std::string>& spec_toml,
                                                            const std::string& spec_label,
                                                            const std::string& save_dir, nb::object on_case) {
  RunOptions opt;
  opt.cli_method = method_or_error(method);
  opt.spec = spec_lookup(spec_toml, spec_label);
  opt.save_dir = save_dir;
  std::vector<Case> cases = read_cases_csv(csv);
  nlohmann::json jcases = nlohmann::json::array();
  std::vector<CaseResult> results;
  int passed = 0, failed = 0;
  for (const Case& c : cases) {
    CaseOutcome out = run_case(c, opt);
    std::string s = render_text(CaseResult{out.c.name, out.result});
    auto eol = s.find('\n');
    std::string where = fmt::format("  case: {}: {}\n", out.c.where(), out.tensors.describe);
    s = eol == std::string::npos ? s + "\n" + where : s.insert(eol + 1, where);
    (out.result.pass ? passed : failed)++;
    auto j = case_json(out);
    jcases.push_back(j);
    results.push_back(CaseResult{out.c.name, out.result});
    if (!on_case.is_none()) on_case(s, j.dump());
  }
  nlohmann::json root = {{"format", "kerncheck.compare"},
                         {"version", 1},
                         {"summary", {{"total", cases.size()}, {"passed", passed}, {"failed", failed}}},
                         {"cases", jcases}};
  return {root.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
          render_junit(results, "kerncheck.compare"), passed, failed};
}

nb::list list_ops_py() {
  nb::list out;
  for (const auto& name : ops::registry().names()) {
    const ops::OpDef& d = *ops::registry().find(name);
    nb::dict e;
    e["name"] = name;
    e["summary"] = d.summary;
    e["inputs"] = d.input_names;
    e["params"] = d.param_names;
    e["default_output"] = std::string(dtype_name(d.default_output));
    std::vector<std::string> cands;
    for (const auto& [c, fn] : d.candidates) cands.push_back(c);
    e["candidates"] = cands;
    e["default_candidate"] = d.default_candidate;
    out.append(e);
  }
  return out;
}

// The method table (compare/methods.h): what kerncheck.METHODS, the CLI help and the docs are checked against.
nb::list methods_py() {
  nb::list out;
  for (const MethodDef* m : methods()) {
    nb::dict e;
    e["name"] = std::string(m->name);
    e["standard"] = m->standard ? nb::cast(std::string(m->standard)) : nb::none();
    e["cli"] = m->cli;
    e["default"] = m == &default_method();
    e["keys"] = std::vector<std::string>(m->keys.begin(), m->keys.end());
    e["csv_keys"] = std::vector<std::string>(m->csv_keys.begin(), m->csv_keys.end());
    e["values"] = m->values;
    e["needs_third"] = m->needs_third;
    // Per output dtype it can take: its default tolerances ({} for binary), and the dtypes routed to it.
    nb::dict defaults;
    std::vector<std::string> auto_for;
    for (int i = 0; i < kDTypeCount; ++i) {
      const DType d = static_cast<DType>(i);
      if (m->auto_for && m->auto_for(d)) auto_for.push_back(dtype_name(d));
      if (!m->outputs.admits(d) || !m->spec_tables.admits(d)) continue;
      const Tolerance t = m->defaults(d);
      nb::dict keys;
      for (std::string_view k : m->keys) {
        if (const auto f = tolerance_field(k); f && t.*f) keys[std::string(k).c_str()] = *(t.*f);
        if (k == "level" && t.level) keys["level"] = *t.level;
      }
      defaults[dtype_name(d)] = keys;
    }
    e["defaults"] = defaults;
    e["auto_for"] = auto_for;
    out.append(e);
  }
  return out;
}

// ---- judge --------------------------------------------------------------------------------------------

// The judge's option table (judge/options.h): kerncheck.test() builds its keywords, defaults and docstring
// from it.
nb::list judge_option_table_py() {
  nb::list out;
  const JudgeOptions defaults;
  for (const JudgeOptionDef& d : judge_option_table()) {
    nb::dict e;
    e["flag"] = d.flag;
    e["python"] = d.python;
    const double v = d.get(defaults);
    switch (d.kind) {
      case JudgeOptionDef::Kind::flag:
        e["kind"] = "flag", e["default"] = nb::bool_(v != 0);
        break;
      case JudgeOptionDef::Kind::count:
        e["kind"] = "count", e["default"] = nb::int_(static_cast<std::int64_t>(v));
        break;
      default:
        e["kind"] = "real", e["default"] = nb::float_(v);
    }
    e["help"] = d.help;
    e["range"] = d.range();
    out.append(e);
  }
  return out;
}

// The judge of `kerncheck test` (docs/judge.md), through the same pipeline as the CLI: returns (JSON report,
// text report, exit code). options: keyword → number (flags 0 or 1), checked by _judge.py's types first.
std::tuple<std::string, std::string, int> judge_py(
    const std::string& golden_path, const std::string& cand_path, const std::vector<std::string>& noise_paths,
    const std::string& floor, const std::optional<std::string>& thresholds_path, const std::map<std::string, double>& options,
    const std::string& ref_logits, std::size_t worst, const std::string& html, const std::string& junit,
    const std::string& json, const std::string& locate) {
  JudgeOptions opt;
  for (const auto& [k, v] : options) {
    const JudgeOptionDef* d = find_judge_option(k);
    if (!d)
      throw nb::type_error(
          fmt::format("test(): {}: expected one of the judge's options, got an unknown one", k).c_str());
    d->set(opt, v);
  }
  check_judge_options(opt);
  if (!locate.empty() && html.empty())
    fail("locate: expected html= (the page that links to the locate report)");
  JudgeReport report;
  {
    nb::gil_scoped_release nogil;
    ReportFiles out{json, junit, html, std::nullopt};
    if (!locate.empty()) out.locate = read_locate_link(locate, html);
    std::optional<Thresholds> th;
    if (thresholds_path) th = read_thresholds(*thresholds_path);
    JudgeRequest q{golden_path, cand_path, noise_paths,  floor, ref_logits,
                   std::nullopt, false,    worst,        opt.allow_floor_mismatch};
    std::vector<std::string> mismatches;
    const Partial runs = gather_runs(q, mismatches);
    report = judge_runs(runs, mismatches, th, opt);
    write_reports(report, out);
  }
  return {report_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace), render_text(report),
          verdict_exit_code(report.verdict)};
}

// ---- corpus, golden and candidate files for kerncheck.torch --------------------------------------------

nb::dict corpus_py(const std::string& path) {
  Corpus c = read_corpus(path);
  nb::dict d;
  d["path"] = path;
  d["tokenizer_id"] = c.tokenizer_id;
  d["tokenizer_origin"] = c.tokenizer_origin;
  d["preset"] = c.preset;
  d["vocab"] = c.vocab;
  d["identity"] = c.identity();
  d["positions"] = c.positions();
  nb::list segs;
  for (const auto& s : c.segments) {
    nb::dict e;
    e["name"] = s.name;
    e["domain"] = s.domain;
    e["depth"] = s.depth;
    e["decode_last"] = s.decode_last;
    e["token_begin"] = s.token_begin;
    segs.append(e);
  }
  d["segments"] = segs;
  d["tokens"] = to_numpy(c.tokens, {c.tokens.size()});
  return d;
}

template <class T>
std::span<const T> span_of(const nb::ndarray<const T, nb::c_contig, nb::device::cpu>& a) {
  return {a.data(), a.size()};
}
using I32 = nb::ndarray<const std::int32_t, nb::c_contig, nb::device::cpu>;
using F32 = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using U8 = nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu>;

std::string write_golden_py(const std::string& out, const std::string& corpus_path, int k, std::int64_t vocab,
                            const std::string& model_id, const std::string& engine, const std::string& variant,
                            const std::string& command_line, I32 top_ids, F32 top_lp, F32 other, F32 token_lp,
                            U8 flags) {
  Corpus c = read_corpus(corpus_path);
  TopkGoldenRows r{k, span_of(top_ids), span_of(top_lp), span_of(other), span_of(token_lp), span_of(flags)};
  return write_golden_from_topk(out, c, r, vocab, model_id, Provenance{engine, variant, command_line});
}

nb::dict golden_py(const std::string& path) {
  Golden g = read_golden(path);
  nb::dict d;
  d["path"] = path;
  d["k"] = g.meta.k;
  d["vocab"] = g.meta.vocab;
  d["n"] = g.meta.n;
  d["checksum"] = g.meta.checksum;
  d["model"] = g.meta.identity.model;
  d["tokenizer"] = g.meta.identity.tokenizer;
  d["corpus"] = g.meta.identity.corpus;
  std::vector<std::int32_t> ids(g.a.top_ids.begin(), g.a.top_ids.end());
  d["top_ids"] = to_numpy(std::move(ids), {static_cast<std::size_t>(g.meta.n), static_cast<std::size_t>(g.meta.k)});
  std::vector<std::int32_t> tok(g.a.token.begin(), g.a.token.end());
  d["token"] = to_numpy(std::move(tok), {static_cast<std::size_t>(g.meta.n)});
  nb::list wins;
  for (auto& w : golden_windows(g)) {
    nb::dict e;
    e["start"] = w.start;
    e["depth"] = w.depth;
    e["n_prefill"] = w.n_prefill;
    e["tokens"] = to_numpy(std::move(w.tokens), {static_cast<std::size_t>(w.depth + 1)});
    wins.append(e);
  }
  d["windows"] = wins;
  return d;
}

std::string write_candidate_py(const std::string& out, const std::string& golden_path, const std::string& engine,
                               const std::string& variant, const std::string& command_line, F32 lp_at_ref,
                               F32 other, I32 top1, F32 top1_lp, F32 token_lp, U8 flags) {
  Golden g = read_golden(golden_path);
  TopkCandidateRows r{span_of(lp_at_ref), span_of(other), span_of(top1), span_of(top1_lp), span_of(token_lp),
                      span_of(flags)};
  return write_candidate_from_topk(out, g, r, Provenance{engine, variant, command_line});
}

std::string tokenizer_identity_py(const std::string& path) { return tokenizer_identity(load_tokenizer(path)); }

void round_mantissa_py(nb::ndarray<float, nb::c_contig, nb::device::cpu> x, int bits) {
  if (bits < 0 || bits > 23) throw nb::value_error(fmt::format("bits: expected 0 … 23, got {}", bits).c_str());
  round_mantissa_inplace(x.data(), x.size(), bits);
}

}  // namespace
}  // namespace kc::py

NB_MODULE(_core, m) {
  using namespace kc::py;
  m.doc() = "kerncheck's C++ core (use the kerncheck package, not this module)";
  nb::exception<kc::Error>(m, "Error", PyExc_ValueError);

  m.def("compare", &compare_py, "actual"_a, "golden"_a, "third"_a.none(), "method"_a.none(), "dtype"_a.none(),
        "spec_toml"_a.none(), "spec_label"_a, "op"_a.none(), "rtol"_a.none(), "atol"_a.none(), "name"_a,
        "Routes and compares; returns (JSON of one case as the CLI writes it, text report, pass).");
  m.def("extremes", &extremes_py, "actual"_a, "golden"_a, "rtol"_a, "atol"_a, "equal_nan"_a,
        "torch.testing-style mismatch figures: (numel, mismatched, max_abs, index, max_rel, index).");
  m.def("run_cases", &run_cases_py, "csv"_a, "method"_a.none(), "spec_toml"_a.none(), "spec_label"_a,
        "save_dir"_a, "on_case"_a.none(), "Runs a CSV case file; returns (JSON, JUnit XML, passed, failed).");
  m.def("register_candidate", &register_candidate, "op"_a, "name"_a, "fn"_a, "summary"_a = "",
        "Makes fn(inputs: list[ndarray f64], params: dict, out_dtype: str) -> ndarray f64 a candidate of op.");
  m.def("list_ops", &list_ops_py);
  m.def("methods", &methods_py);
  m.def("judge", &judge_py, "golden"_a, "candidate"_a, "noise"_a, "floor"_a, "thresholds"_a.none(), "options"_a,
        "ref_logits"_a, "worst"_a, "html"_a, "junit"_a, "json"_a, "locate"_a,
        "The judge of `kerncheck test`; returns (JSON report, text report, exit code).");
  m.def("judge_option_table", &judge_option_table_py,
        "The judge's options: [{flag, python, kind, default, help, range}] (judge/options.h).");
  m.def("did_you_mean", [](const std::string& got, const std::vector<std::string>& known) {
    return kc::did_you_mean(got, known);
  }, "got"_a, "known"_a, "' (did you mean \"x\"?)' for the known word closest to got, or ''.");
  m.def("read_corpus", &corpus_py, "path"_a);
  m.def("read_golden", &golden_py, "path"_a);
  m.def("write_golden_topk", &write_golden_py, "out"_a, "corpus"_a, "k"_a, "vocab"_a, "model_id"_a, "engine"_a,
        "variant"_a, "command_line"_a, "top_ids"_a, "top_logprobs"_a, "other_logprob"_a, "token_logprob"_a,
        "flags"_a);
  m.def("write_candidate_topk", &write_candidate_py, "out"_a, "golden"_a, "engine"_a, "variant"_a,
        "command_line"_a, "logprobs_at_ref"_a, "other_logprob"_a, "top1_id"_a, "top1_logprob"_a,
        "token_logprob"_a, "flags"_a);
  m.def("model_identity", &kc::model_identity, "path"_a);
  m.def("tokenizer_identity", &tokenizer_identity_py, "path"_a);
  m.def("round_mantissa_", &round_mantissa_py, "x"_a.noconvert(), "bits"_a,
        "Rounds a C-contiguous float32 array to `bits` explicit mantissa bits in place (RNE).");
  m.def("round_mantissa", [](double x, int bits) { return kc::round_mantissa(x, bits); }, "x"_a, "bits"_a);
  m.def("dtype_names", &kc::dtype_names_list);
  // locate's site rule (lab/locate.h test_sites) for kerncheck.torch.locate: per site its samples' clusters
  // and runs[m + 1][samples] (noise runs, then the candidate); returns JSON text, one object per site.
  m.def("locate_test_sites",
        [](const std::vector<std::vector<std::int32_t>>& clusters,
           const std::vector<std::vector<std::vector<double>>>& runs, double alpha, double min_factor) {
          if (clusters.size() != runs.size())
            throw kc::Error(fmt::format("runs: expected one entry per site ({}), got {}", clusters.size(), runs.size()));
          std::vector<kc::SiteSamples> sites;
          for (std::size_t i = 0; i < clusters.size(); ++i) {
            if (runs[i].size() < 3)
              throw kc::Error(fmt::format("runs[{}]: expected at least 2 noise runs and the candidate, got {} runs", i,
                                          runs[i].size()));
            for (const auto& r : runs[i])
              if (r.size() != clusters[i].size())
                throw kc::Error(fmt::format("runs[{}]: expected {} samples per run, got {}", i, clusters[i].size(),
                                            r.size()));
            sites.push_back({clusters[i], runs[i]});
          }
          nlohmann::json out = nlohmann::json::array();
          auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
          for (const auto& t : kc::test_sites(sites, alpha, min_factor)) {
            nlohmann::json n = nlohmann::json::array();
            for (double x : t.noise) n.push_back(num(x));
            out.push_back({{"samples", t.samples}, {"clusters", t.clusters}, {"cand", num(t.cand)},
                           {"floor", num(t.floor)}, {"noise", n}, {"ratio", num(t.ratio)}, {"sd_log", num(t.sd)},
                           {"df", t.df}, {"t", num(t.t)}, {"p_value", num(t.p_value)}, {"rejected", t.rejected},
                           {"departs", t.departs}});
          }
          return out.dump();
        },
        "clusters"_a, "runs"_a, "alpha"_a, "min_factor"_a);
}
