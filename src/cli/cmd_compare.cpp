// kerncheck compare: tensor-level precision check (docs/compare.md, docs/cli-compare.md).
//
//   kerncheck compare ACTUAL GOLDEN [--third B] [--compare M] [--dtype D] [--shape S] [--spec F --op NAME]
//   kerncheck compare -i cases.csv [--compare M] [--spec F] [--save DIR]
//   both: [--json FILE] [--junit FILE]
//
// Exit: 0 every case passes, 1 any fails, 3 bad input (the run stops at the first bad case; the cases
// before it are printed, no --json/--junit file is written).
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "compare/methods.h"
#include "compare/report.h"
#include "compare/spec.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "opmode/cases.h"
#include "core/text_safe.h"

namespace kc::cli {
namespace {

struct Options {
  std::string actual, golden, third, cases, compare, dtype, shape, spec, op, json, junit, save;
  bool list_ops = false, flat = false;
};

// ---- rendering (compare/report.h, plus where each case came from) -------------------------------

CaseResult case_result(const CaseOutcome& o) { return CaseResult{o.c.name, o.result}; }

// The report's text with a second line saying where the case is defined and what it compared.
std::string case_text(const CaseOutcome& o) {
  std::string s = render_text(case_result(o));
  auto eol = s.find('\n');
  std::string where = fmt::format("  case: {}: {}\n", o.c.where(), o.tensors.describe);
  return eol == std::string::npos ? s + "\n" + where : s.insert(eol + 1, where);
}

std::string run_json(const std::vector<CaseOutcome>& outs) {
  std::vector<CaseResult> results;
  for (const auto& o : outs) results.push_back(case_result(o));
  auto j = nlohmann::json::parse(render_json(results));
  for (std::size_t i = 0; i < outs.size() && i < j["cases"].size(); ++i) {
    auto& jc = j["cases"][i];
    const Case& c = outs[i].c;
    jc["where"] = c.where();
    jc["kind"] = c.op_mode ? "op" : "files";
    jc["describe"] = outs[i].tensors.describe;
    if (c.op_mode) {
      jc["op"] = c.op;
      jc["candidate"] = c.candidate;
      jc["reference"] = c.reference.empty() ? std::string("f64") : c.reference;
      jc["seed"] = c.seed;
    } else {
      jc["actual"] = c.actual;
      jc["golden"] = c.golden;
    }
  }
  return j.dump(2) + "\n";
}

// ---- the command -----------------------------------------------------------------------------------

void list_ops() {
  for (const auto& name : ops::registry().names()) {
    const ops::OpDef& d = *ops::registry().find(name);
    std::printf("%s: %s\n  inputs: %s\n", name.c_str(), d.summary.c_str(),
                fmt::format("{}", fmt::join(d.input_names, "; ")).c_str());
    if (!d.param_names.empty())
      std::printf("  params: %s\n", fmt::format("{}", fmt::join(d.param_names, ", ")).c_str());
    std::printf("  output: %s (default %s)\n  candidates:\n", d.accepted_outputs_text().c_str(),
                dtype_name(d.default_output));
    for (const auto& [cand, fn] : d.candidates) {
      auto it = d.candidate_summaries.find(cand);
      std::printf("    %-12s %s%s\n", cand.c_str(),
                  it == d.candidate_summaries.end() ? "" : it->second.c_str(),
                  cand == d.default_candidate ? " (default)" : "");
    }
  }
}

SpecLookup make_spec_lookup(const std::string& path);

int run_compare(int argc, char** argv) {
  Options o;
  CLI::App app{"Compare tensors (or op-mode cases) with a precision criterion routed by output dtype"};
  app.add_option("actual", o.actual,
                 "tensor under test: .npy, .safetensors[:NAME] or raw bytes (--dtype, --shape)");
  app.add_option("golden", o.golden, "golden tensor, same forms as ACTUAL");
  app.add_option("-i,--input", o.cases, "CSV case file (one case per row); excludes ACTUAL GOLDEN");
  app.add_option("--third", o.third, "third-party tensor b for cross_check");
  app.add_option("--compare", o.compare,
                 fmt::format("method: {} (default: routed by --spec, then by dtype, then {})", cli_method_names(),
                             default_method().name));
  app.add_option("--dtype", o.dtype, "dtype of raw files and npy void types; output dtype for routing");
  app.add_option("--shape", o.shape, "shape of raw files, e.g. 64,128");
  app.add_flag("--flat", o.flat,
               "compare the elements in order when the shapes differ (equal counts); without it a shape "
               "mismatch is refused (exit 3)");
  app.add_option("--spec", o.spec, "TOML spec: per operator and dtype, the standard and tolerance overrides");
  app.add_option("--op", o.op, "operator name to look up in --spec (file comparison)");
  app.add_option("--json", o.json, "write the results as JSON to FILE");
  app.add_option("--junit", o.junit, "write the results as JUnit XML to FILE");
  app.add_option("--save", o.save,
                 "op cases: write the generated inputs, golden and actual as .npy under DIR/NAME/");
  app.add_flag("--list-ops", o.list_ops, "list the built-in ops and their candidates, then exit");
  if (int rc = parse_or_exit(app, argc, argv); rc >= 0) return rc;

  if (o.list_ops) {
    list_ops();
    return kExitPass;
  }
  check_outputs_apart({o.actual, o.golden, o.third, o.cases, o.spec}, {o.json, o.junit});
  RunOptions opt;
  if (!o.compare.empty()) {
    auto m = parse_method(o.compare);
    if (!m)
      throw_input_error("--compare", "method", fmt::format("one of {}", cli_method_names()),
                        o.compare + method_suggestion(o.compare));
    opt.cli_method = *m;
  }
  if (!o.spec.empty()) opt.spec = make_spec_lookup(o.spec);
  opt.save_dir = o.save;

  std::vector<Case> cases;
  if (!o.cases.empty()) {
    if (!o.actual.empty())
      fail("ACTUAL GOLDEN: expected none with -i (the case file names the tensors), got {}", o.actual);
    for (auto [flag, v] :
         {std::pair{"--third", &o.third}, {"--dtype", &o.dtype}, {"--shape", &o.shape}, {"--op", &o.op}})
      if (!v->empty()) fail("{}: expected none with -i (use the CSV column), got {}", flag, *v);
    if (o.flat) fail("--flat: expected none with -i (use the CSV column flat), got it");
    cases = read_cases_csv(o.cases);
  } else {
    if (o.actual.empty() || o.golden.empty())
      fail("arguments: expected ACTUAL GOLDEN or -i CASES.csv, got {}",
           o.actual.empty() ? "neither" : "only ACTUAL");
    Case c;
    c.name = o.actual;
    c.actual = o.actual;
    c.golden = o.golden;
    c.third = o.third;
    c.op = o.op;
    c.flat = o.flat;
    if (!o.dtype.empty()) {
      auto d = parse_dtype(o.dtype);
      if (!d) throw_input_error("--dtype", "dtype", fmt::format("one of {}", dtype_names_list()), o.dtype);
      c.dtype = *d;
    }
    if (!o.shape.empty()) c.shape = parse_shape(o.shape, "--shape");
    cases.push_back(std::move(c));
  }

  std::vector<CaseOutcome> outs;
  std::size_t passed = 0, failed = 0;
  for (const Case& c : cases) {
    CaseOutcome out = run_case(c, opt);
    print_safe(stdout, case_text(out));
    std::fputs("\n", stdout);
    std::fflush(stdout);
    (out.result.pass ? passed : failed)++;
    outs.push_back(std::move(out));
  }
  std::printf("%zu passed, %zu failed\n", passed, failed);

  if (!o.json.empty()) write_file_atomic(o.json, run_json(outs));
  if (!o.junit.empty()) {
    std::vector<CaseResult> results;
    for (const auto& out : outs) results.push_back(case_result(out));
    write_file_atomic(o.junit, render_junit(results, "kerncheck.compare"));
  }
  return failed ? kExitFail : kExitPass;
}

SpecLookup make_spec_lookup(const std::string& path) {
  auto spec = std::make_shared<Spec>(load_spec(path));
  return [spec](const std::string& op, RouteRequest& req) {
    if (const SpecEntry* e = spec->find(op, req.output_dtype)) {
      req.spec_method = e->method;
      req.spec_where = e->where;
      req.spec_tol = e->tol;
    }
  };
}

Registrar reg({"compare", "compare tensors or op-mode cases with a routed precision criterion", run_compare});

}  // namespace
}  // namespace kc::cli
