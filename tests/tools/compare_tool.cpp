// kc_compare_tool ACTUAL GOLDEN [THIRD] [--method M] [--dtype D] [--rtol X] [--atol X] [--ptol X]
//                 [--threshold X] [--limit X] [--level L] [--spec FILE --op OP] [--inputs D,D…]
//                 [--format json|text|junit] [--threads N]
// Drives route() + compare() and prints the report (JSON by default) for the Python tests, before and
// beside the CLI. --dtype is the hint for .npy files written by ml_dtypes (void descrs) and raw files need
// --shape too. --method is the --compare of the CLI; the tolerance flags act as spec overrides.
// Exit: 0 PASS, 1 FAIL, 3 kc::Error (message on stderr).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "compare/report.h"
#include "compare/spec.h"
#include "core/error.h"
#include "core/parallel.h"
#include "io/tensor.h"

int main(int argc, char** argv) {
  try {
    std::vector<std::string> files;
    kc::RawLayout raw;
    kc::RouteRequest req;
    std::string format = "json", spec_path, op;
    bool have_tol = false;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) kc::fail("{}: expected a value", a);
        return argv[++i];
      };
      auto dbl = [&]() {
        have_tol = true;
        return std::strtod(next().c_str(), nullptr);
      };
      if (a == "--method") {
        std::string m = next();
        req.cli_method = kc::parse_method(m);
        if (!req.cli_method) kc::fail("--method: expected a method name, got {}", m);
      } else if (a == "--dtype") {
        std::string d = next();
        raw.dtype = kc::parse_dtype(d);
        if (!raw.dtype) kc::fail("--dtype: expected a dtype, got {}", d);
      } else if (a == "--shape") {
        raw.shape = kc::parse_shape(next(), "--shape");
      } else if (a == "--rtol") {
        req.spec_tol.rtol = dbl();
      } else if (a == "--atol") {
        req.spec_tol.atol = dbl();
      } else if (a == "--ptol") {
        req.spec_tol.ptol = dbl();
      } else if (a == "--threshold") {
        req.spec_tol.threshold = dbl();
      } else if (a == "--limit") {
        req.spec_tol.limit = dbl();
      } else if (a == "--level") {
        req.spec_tol.level = next();
        have_tol = true;
      } else if (a == "--spec") {
        spec_path = next();
      } else if (a == "--op") {
        op = next();
      } else if (a == "--inputs") {
        std::string s = next();
        std::size_t p = 0;
        while (p <= s.size()) {
          std::size_t q = s.find(',', p);
          if (q == std::string::npos) q = s.size();
          auto d = kc::parse_dtype(s.substr(p, q - p));
          if (!d) kc::fail("--inputs: expected dtypes, got {}", s);
          req.input_dtypes.push_back(*d);
          p = q + 1;
        }
      } else if (a == "--format") {
        format = next();
      } else if (a == "--threads") {
        kc::set_thread_count(std::atoi(next().c_str()));
      } else {
        files.push_back(a);
      }
    }
    if (files.size() < 2 || files.size() > 3) kc::fail("usage: expected ACTUAL GOLDEN [THIRD], got {} files", files.size());
    kc::Tensor actual = kc::load_tensor(files[0], raw);
    kc::Tensor golden = kc::load_tensor(files[1], raw);
    std::optional<kc::Tensor> third;
    if (files.size() == 3) third = kc::load_tensor(files[2], raw);
    req.output_dtype = golden.dtype;
    if (!spec_path.empty()) {
      kc::Spec spec = kc::load_spec(spec_path);
      if (const kc::SpecEntry* e = spec.find(op, golden.dtype)) {
        req.spec_method = e->method;
        req.spec_where = e->where;
        req.spec_tol = e->tol;
      }
    } else if (have_tol && req.cli_method) {
      // Tolerance flags act as a spec declaring the same method.
      req.spec_method = req.cli_method;
      req.spec_where = "flags";
    }
    kc::Route rt = kc::route(req);
    kc::CompareResult r = kc::compare({&actual, &golden, third ? &*third : nullptr}, rt);
    std::vector<kc::CaseResult> cases{{files[1], r}};
    std::string out = format == "text"    ? kc::render_text_run(cases)
                      : format == "junit" ? kc::render_junit(cases)
                                          : kc::render_json(cases);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return r.pass ? 0 : 1;
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "kc_compare_tool: error: %s\n", e.what());
    return 3;
  }
}
