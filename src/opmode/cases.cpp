#include "opmode/cases.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "compare/methods.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/npy.h"
#include "numeric/formats.h"

namespace kc {

// ---- CSV ----------------------------------------------------------------------------------------

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<CsvRecord> parse_csv(std::string_view text, std::string_view file) {
  std::vector<CsvRecord> out;
  std::size_t i = 0, line = 1, line_start = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = line_start = 3;
  auto col = [&](std::size_t pos) { return pos - line_start + 1; };
  auto err = [&](std::size_t ln, std::size_t c, std::string_view msg) {
    fail("{}:{}:{}: {}", file, ln, c, msg);
  };
  const std::size_t n = text.size();
  while (i < n) {
    // Skip blank lines and '#' comments at the start of a record.
    std::size_t j = i;
    while (j < n && is_blank(text[j])) ++j;
    if (j == n || text[j] == '\n' || (text[j] == '\r' && j + 1 < n && text[j + 1] == '\n') ||
        text[i] == '#') {
      while (i < n && text[i] != '\n') ++i;
      if (i < n) ++i;
      ++line;
      line_start = i;
      continue;
    }
    CsvRecord rec;
    rec.line = line;
    for (;;) {  // one field per iteration
      std::size_t start = i;
      while (i < n && is_blank(text[i])) ++i;
      std::string field;
      rec.columns.push_back(col(start));
      if (i < n && text[i] == '"') {
        std::size_t open_line = line, open_col = col(i);
        ++i;
        for (;;) {
          if (i == n)
            err(open_line, open_col, "quoted field: expected a closing '\"', got the end of the file");
          char c = text[i];
          if (c == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (c == '\0') err(line, col(i), "expected text, got a NUL byte");
          if (c == '\n') {
            ++line;
            line_start = i + 1;
          }
          field += c;
          ++i;
        }
        while (i < n && is_blank(text[i])) ++i;
        if (i < n && text[i] != ',' && text[i] != '\n' &&
            !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n'))
          err(line, col(i),
              fmt::format("expected ',' or the end of the line after a closing '\"', got '{}'", text[i]));
      } else {
        std::size_t b = i;
        while (i < n && text[i] != ',' && text[i] != '\n' &&
               !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n')) {
          if (text[i] == '"')
            err(line, col(i),
                "expected a field without '\"' (quote the whole field and write \"\" for a quote), got '\"'");
          if (text[i] == '\0') err(line, col(i), "expected text, got a NUL byte");
          ++i;
        }
        field = std::string(trim(text.substr(b, i - b)));
      }
      rec.fields.push_back(std::move(field));
      if (i < n && text[i] == ',') {
        ++i;
        continue;
      }
      // End of record.
      if (i < n && text[i] == '\r') ++i;
      if (i < n && text[i] == '\n') {
        ++i;
        ++line;
        line_start = i;
      }
      break;
    }
    out.push_back(std::move(rec));
  }
  return out;
}

// ---- case rows ----------------------------------------------------------------------------------

const std::vector<std::string>& case_columns() {
  static const std::vector<std::string> cols = {"name",
                                                "actual",
                                                "golden",
                                                "third",
                                                "dtype",
                                                "shape",
                                                "flat",
                                                "compare",
                                                "op",
                                                "precision_tolerances",
                                                "absolute_precision",
                                                "shapes",
                                                "seed",
                                                "dist",
                                                "candidate",
                                                "reference",
                                                "params"};
  return cols;
}

std::string Case::where() const {
  return file.empty() ? std::string("command line") : fmt::format("{}:{}", file, line);
}

namespace {

constexpr std::size_t kMaxOpElements = std::size_t{1} << 25;  // per generated tensor (256 MiB of f64)

// The op-mode-only columns, refused on file rows.
const std::set<std::string>& op_only_columns() {
  static const std::set<std::string> s = {"shapes", "seed", "dist", "candidate", "reference", "params"};
  return s;
}

struct RowReader {
  std::string_view file;
  const CsvRecord& rec;
  const std::map<std::string, std::size_t>& index;

  bool has(const std::string& name) const {
    auto it = index.find(name);
    return it != index.end() && !rec.fields[it->second].empty();
  }
  const std::string& get(const std::string& name) const {
    static const std::string empty;
    auto it = index.find(name);
    return it == index.end() ? empty : rec.fields[it->second];
  }
  std::string at(const std::string& name) const {
    auto it = index.find(name);
    std::size_t column = it == index.end() ? 1 : rec.columns[it->second];
    return fmt::format("{}:{}:{}", file, rec.line, column);
  }
  [[noreturn]] void error(const std::string& name, std::string_view expected) const {
    throw_input_error(at(name), fmt::format("column {}", name), expected, fmt::format("\"{}\"", get(name)));
  }
};

bool parse_double(std::string_view s, double& out) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

bool parse_u64(std::string_view s, std::uint64_t& out) {
  s = trim(s);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

// "((0.001, 0.001),)" or "(0.001, 0.001)" or "[[1e-3, 1e-3]]": a list of (rtol, ptol) pairs.
bool parse_tolerance_tuples(std::string_view s, std::vector<std::pair<double, double>>& out) {
  std::vector<double> nums;
  std::vector<std::vector<double>> groups;
  int depth = 0, max_depth = 0;
  std::size_t i = 0;
  std::vector<double>* cur = nullptr;
  while (i < s.size()) {
    char c = s[i];
    if (c == '(' || c == '[') {
      ++depth;
      max_depth = std::max(max_depth, depth);
      if (depth > 2) return false;
      groups.emplace_back();
      cur = &groups.back();
      ++i;
    } else if (c == ')' || c == ']') {
      if (--depth < 0) return false;
      cur = nullptr;
      ++i;
    } else if (c == ',' || is_blank(c)) {
      ++i;
    } else {
      std::size_t b = i;
      while (i < s.size() && s[i] != ',' && s[i] != ')' && s[i] != ']' && !is_blank(s[i])) ++i;
      double v;
      if (!cur || !parse_double(s.substr(b, i - b), v) || v < 0) return false;
      cur->push_back(v);
    }
  }
  if (depth != 0) return false;
  for (auto& g : groups) {
    if (g.empty()) continue;  // the outer tuple
    if (g.size() != 2) return false;
    out.emplace_back(g[0], g[1]);
  }
  return !out.empty();
}

// "64x128;128x32": one shape per op input.
bool parse_op_shapes(std::string_view s, std::vector<ops::Shape>& out, std::string& why) {
  std::size_t start = 0;
  while (true) {
    auto semi = s.find(';', start);
    std::string_view part =
        trim(s.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start));
    ops::Shape shape;
    std::size_t b = 0;
    std::size_t numel = 1;
    while (true) {
      auto x = part.find_first_of("xX", b);
      std::string_view dim =
          trim(part.substr(b, x == std::string_view::npos ? std::string_view::npos : x - b));
      std::uint64_t v;
      if (dim.empty() || !parse_u64(dim, v) || v == 0 || v > kMaxOpElements) {
        why = fmt::format("sizes >= 1 like 64x128;128x32 (bad size '{}')", dim);
        return false;
      }
      numel *= v;
      if (numel > kMaxOpElements) {
        why = fmt::format("at most {} elements per input", kMaxOpElements);
        return false;
      }
      shape.push_back(static_cast<std::int64_t>(v));
      if (x == std::string_view::npos) break;
      b = x + 1;
    }
    out.push_back(std::move(shape));
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  return true;
}

// "block=64; eps=1e-6"
bool parse_params(std::string_view s, ops::Params& out) {
  std::size_t start = 0;
  while (start <= s.size()) {
    auto semi = s.find(';', start);
    std::string_view part =
        trim(s.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start));
    if (!part.empty()) {
      auto eq = part.find('=');
      double v;
      if (eq == std::string_view::npos || trim(part.substr(0, eq)).empty() ||
          !parse_double(part.substr(eq + 1), v))
        return false;
      out.values[std::string(trim(part.substr(0, eq)))] = v;
    }
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  return true;
}

std::string resolve_path(std::string_view base_dir, const std::string& p) {
  if (p.empty() || p.front() == '/' || base_dir.empty()) return p;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

std::string candidate_list(const ops::OpDef& d) {
  std::string out;
  for (auto& [k, v] : d.candidates) out += (out.empty() ? "" : ", ") + k;
  return out;
}

Case parse_row(std::string_view file, std::string_view base_dir, const CsvRecord& rec,
               const std::map<std::string, std::size_t>& index) {
  RowReader r{file, rec, index};
  Case c;
  c.file = std::string(file);
  c.line = rec.line;
  c.name = r.get("name");
  c.op_mode = !r.has("actual");

  if (r.has("dtype")) {
    auto d = parse_dtype(r.get("dtype"));
    if (!d) r.error("dtype", fmt::format("a dtype ({})", dtype_names_list()));
    c.dtype = *d;
  }
  if (r.has("compare")) {
    const std::string& name = r.get("compare");
    auto m = parse_method(name);
    if (!m || !method_def(*m).cli)
      throw_input_error(r.at("compare"), "column compare",
                        fmt::format("one of {} ({} is declared only in a spec)", cli_method_names(),
                                    spec_only_method_names()),
                        fmt::format("\"{}\"{}", name, m ? "" : method_suggestion(name)));
    c.compare = *m;
  }
  c.op = r.get("op");
  if (r.has("precision_tolerances") &&
      !parse_tolerance_tuples(r.get("precision_tolerances"), c.precision_tolerances))
    r.error("precision_tolerances", "(rtol, ptol) pairs of numbers >= 0 like \"((0.001, 0.001),)\"");
  if (c.precision_tolerances.size() > 1)
    r.error("precision_tolerances", "one (rtol, ptol) pair: a case compares one output");
  if (r.has("absolute_precision")) {
    double v;
    if (!parse_double(r.get("absolute_precision"), v) || v < 0)
      r.error("absolute_precision", "a number >= 0 like 1e-8");
    c.absolute_precision = v;
  }

  if (!c.op_mode) {
    if (!r.has("golden")) r.error("golden", "a golden tensor path (the row has an actual)");
    c.actual = resolve_path(base_dir, r.get("actual"));
    c.golden = resolve_path(base_dir, r.get("golden"));
    if (r.has("third")) c.third = resolve_path(base_dir, r.get("third"));
    if (r.has("shape")) {
      try {
        c.shape = parse_shape(r.get("shape"), r.at("shape"));
      } catch (const Error&) {
        r.error("shape", "a shape like 2,3,4 or [2, 3, 4]");
      }
    }
    if (r.has("flat")) {
      const std::string& v = r.get("flat");
      if (v != "true" && v != "false") r.error("flat", "true or false");
      c.flat = v == "true";
    }
    for (auto& col : op_only_columns())
      if (r.has(col)) r.error(col, "empty on a file row (it has an actual); op-mode rows leave actual empty");
    if (c.name.empty()) c.name = std::filesystem::path(r.get("actual")).filename().string();
    return c;
  }

  // Op mode.
  if (c.op.empty())
    r.error("op", fmt::format("a built-in op ({}) or an actual path", ops::registry().names_text()));
  const ops::OpDef* def = ops::registry().find(c.op);
  if (!def) r.error("op", fmt::format("a built-in op ({})", ops::registry().names_text()));
  if (r.has("golden")) r.error("golden", "empty on an op-mode row (use reference to pick the golden)");
  if (r.has("shape")) r.error("shape", "empty on an op-mode row (use shapes)");
  if (r.has("flat")) r.error("flat", "empty on an op-mode row (its golden has the output's shape)");
  std::string why;
  if (!r.has("shapes") || !parse_op_shapes(r.get("shapes"), c.shapes, why))
    r.error("shapes", why.empty() ? "one shape per input like 64x128;128x32" : why);
  if (r.has("seed") && !parse_u64(r.get("seed"), c.seed))
    r.error("seed", "an unsigned 64-bit integer (decimal or 0x hex)");
  if (r.has("dist")) {
    std::string_view s = r.get("dist");
    std::size_t start = 0;
    while (true) {
      auto semi = s.find(';', start);
      try {
        c.dists.push_back(ops::parse_distribution(
            s.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start), "dist"));
      } catch (const Error&) {
        r.error("dist",
                "normal(mean, std), uniform(lo, hi) or const(v), one for all inputs or one per input "
                "separated by ';'");
      }
      if (semi == std::string_view::npos) break;
      start = semi + 1;
    }
  } else {
    c.dists.push_back({});
  }
  c.candidate = r.get("candidate");
  c.reference = r.get("reference");
  c.third_candidate = r.get("third");
  if (r.has("params") && !parse_params(r.get("params"), c.params))
    r.error("params", "key=value pairs separated by ';' like block=64;eps=1e-6");

  // Registry checks, with the row's location.
  auto where_col = [&](const char* col) { return r.at(col); };
  if (c.dists.size() != 1 && c.dists.size() != c.shapes.size())
    r.error("dist", fmt::format("one distribution, or one per input ({})", c.shapes.size()));
  if (!c.candidate.empty() && !def->candidates.count(c.candidate))
    r.error("candidate", fmt::format("a candidate of {} ({})", c.op, candidate_list(*def)));
  for (const char* col : {"reference", "third"}) {
    const std::string& v = r.get(col);
    if (v.empty() || (std::string_view(col) == "reference" && (v == "f64" || v == "reference"))) continue;
    if (!def->candidates.count(v))
      r.error(col, fmt::format("f64 or a candidate of {} ({})", c.op, candidate_list(*def)));
  }
  for (auto& [k, v] : c.params.values)
    if (std::find(def->param_names.begin(), def->param_names.end(), k) == def->param_names.end())
      r.error("params", def->param_names.empty()
                            ? fmt::format("no params ({} takes none)", c.op)
                            : fmt::format("keys among {}", fmt::join(def->param_names, ", ")));
  try {
    resolve_op_case(c);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", where_col("shapes"), e.what()));
  }
  return c;
}

}  // namespace

void resolve_op_case(Case& c) {
  const ops::OpDef* def = ops::registry().find(c.op);
  if (!def) fail("op: expected a built-in op ({}), got \"{}\"", ops::registry().names_text(), c.op);
  if (!c.dtype) c.dtype = def->default_output;
  if (!def->accepts_output(*c.dtype))
    fail("dtype: expected {} (op {}), got {}", def->accepted_outputs_text(), c.op, dtype_name(*c.dtype));
  if (is_complex(*c.dtype)) fail("dtype: expected a real dtype (op {}), got {}", c.op, dtype_name(*c.dtype));
  if (c.candidate.empty()) c.candidate = def->default_candidate;
  if (c.reference == "reference") c.reference = "f64";
  if (c.dists.empty()) c.dists.push_back({});
  ops::Shape out = def->output_shape(c.shapes, c.params);  // throws on a bad shape
  std::size_t n = 1;
  for (auto d : out) {
    n *= static_cast<std::size_t>(d);
    if (n > kMaxOpElements)
      fail("op {}: output: expected at most {} elements, got shape {}", c.op, kMaxOpElements,
           ops::shape_text(out));
  }
  if (c.name.empty()) c.name = fmt::format("{}/{}", c.op, c.candidate);
}

std::vector<Case> parse_cases_csv(std::string_view text, std::string_view file, std::string_view base_dir) {
  auto records = parse_csv(text, file);
  if (records.empty())
    fail("{}: header: expected a header row ({}), got an empty file", file, fmt::join(case_columns(), ", "));
  const CsvRecord& head = records.front();
  std::map<std::string, std::size_t> index;
  const auto& known = case_columns();
  for (std::size_t i = 0; i < head.fields.size(); ++i) {
    const std::string& h = head.fields[i];
    std::string where = fmt::format("{}:{}:{}", file, head.line, head.columns[i]);
    if (std::find(known.begin(), known.end(), h) == known.end())
      throw_input_error(
          where, "header",
          fmt::format("column names among {} (a header row is required)", fmt::join(known, ", ")),
          fmt::format("\"{}\"", h));
    if (index.count(h))
      throw_input_error(where, "header", "each column once", fmt::format("\"{}\" twice", h));
    index[h] = i;
  }
  if (!index.count("actual") && !index.count("op"))
    fail("{}:{}: header: expected an actual column (file cases) or an op column (op cases), got {}", file,
         head.line, fmt::join(head.fields, ", "));
  std::vector<Case> cases;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    if (rec.fields.size() != head.fields.size())
      fail("{}:{}: fields: expected {} (as in the header), got {}", file, rec.line, head.fields.size(),
           rec.fields.size());
    cases.push_back(parse_row(file, base_dir, rec, index));
  }
  if (cases.empty()) fail("{}: rows: expected at least one case after the header, got none", file);
  return cases;
}

std::vector<Case> read_cases_csv(const std::string& path) {
  auto f = MappedFile::open(path);
  auto b = f->bytes();
  std::string_view text(reinterpret_cast<const char*>(b.data()), b.size());
  std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_cases_csv(text, path, dir);
}

// ---- materializing and running ------------------------------------------------------------------

namespace {

Tensor tensor_from(DType d, const ops::Array& a, std::string origin) {
  return make_tensor_f64(d, a.shape, a.values, std::move(origin));
}

// The file's own dtype wins; the given dtype resolves what the file leaves open (raw bytes, npy void
// types) and hifloat32 stored as f32.
Tensor load_with_hint(const std::string& path, const Case& c) {
  RawLayout raw{c.dtype, c.shape};
  if (!c.dtype) return load_tensor(path, raw);
  std::optional<Tensor> self;
  try {
    self = load_tensor(path, RawLayout{std::nullopt, c.shape});
  } catch (const Error&) {
  }
  if (self && self->dtype == *c.dtype) return *self;
  try {
    return load_tensor(path, raw);
  } catch (const Error&) {
    if (!self) throw;
  }
  // The file has a type of its own that is not the given one.
  const int file_bits = dtype_info(self->dtype).bits, want_bits = dtype_info(*c.dtype).bits;
  if (file_bits != want_bits)
    throw_input_error(self->origin, "dtype",
                      fmt::format("{} ({}-bit, the case's dtype) or a file of {}-bit codes", dtype_name(*c.dtype),
                                  want_bits, want_bits),
                      fmt::format("{} ({}-bit) in the file", dtype_name(self->dtype), file_bits));
  // Unsigned integers of the same width are how a file holds codes of a type it has no name for (safetensors
  // has no hifloat8: such outputs are stored as U8): the case's dtype says what the codes mean. Any other
  // type the file declares is what its bytes are: a dtype that contradicts it is refused, not applied.
  const bool codes = self->dtype == DType::uint8 || self->dtype == DType::uint16 ||
                     self->dtype == DType::uint32 || self->dtype == DType::uint64;
  if (!codes)
    throw_input_error(self->origin, "dtype",
                      fmt::format("{} (the case's dtype), or a file that leaves its type open (raw bytes, a numpy "
                                  "void type, unsigned codes)",
                                  dtype_name(*c.dtype)),
                      fmt::format("{} declared by the file", dtype_name(self->dtype)));
  self->dtype = *c.dtype;
  return *self;
}

}  // namespace

CaseTensors materialize(const Case& c) {
  CaseTensors t;
  if (!c.op_mode) {
    t.actual = load_with_hint(c.actual, c);
    t.golden = load_with_hint(c.golden, c);
    if (!c.third.empty()) t.third = load_with_hint(c.third, c);
    // Output dtype for routing: the actual's, unless the file could not say (then --dtype already set it).
    t.output_dtype = t.actual.dtype;
    t.describe = fmt::format("{} vs {}", t.actual.origin, t.golden.origin);
    return t;
  }
  const ops::OpDef* def = ops::registry().find(c.op);
  KC_ASSERT(def, "op {} not resolved", c.op);
  const DType out = c.dtype.value_or(def->default_output);
  const DType in_dtype = def->input_dtype.value_or(out);
  std::vector<ops::Array> inputs;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    ops::Array a{c.shapes[i], std::vector<double>(ops::shape_numel(c.shapes[i]))};
    ops::generate(c.dists.size() == 1 ? c.dists[0] : c.dists[i], c.seed, i, a.values);
    ops::round_to(in_dtype, a.values);
    t.inputs.push_back(tensor_from(in_dtype, a, fmt::format("<{} input {}>", c.op, i)));
    t.input_dtypes.push_back(in_dtype);
    inputs.push_back(std::move(a));
  }
  auto run_candidate = [&](const std::string& name) {
    ops::Array y = def->candidates.at(name)(inputs, c.params, out);
    return tensor_from(out, y, fmt::format("<{}/{}>", c.op, name));
  };
  t.output_dtype = out;
  t.actual = run_candidate(c.candidate);
  if (c.reference.empty() || c.reference == "f64") {
    ops::Array g = def->reference(inputs, c.params);
    t.golden = tensor_from(DType::float64, g, fmt::format("<{} f64 reference>", c.op));
  } else {
    t.golden = run_candidate(c.reference);
  }
  if (!c.third_candidate.empty()) t.third = run_candidate(c.third_candidate);
  std::vector<std::string> shapes;
  for (auto& s : c.shapes) shapes.push_back(ops::shape_text(s));
  t.describe =
      fmt::format("{}/{} vs {}, shapes {}, inputs {}, seed {}, dist {}", c.op, c.candidate,
                  c.reference.empty() || c.reference == "f64" ? "f64 reference" : c.op + "/" + c.reference,
                  fmt::join(shapes, ";"), dtype_name(in_dtype), c.seed,
                  c.dists.size() == 1 ? c.dists[0].text() : std::string("per input"));
  if (!c.third_candidate.empty()) t.describe += fmt::format(", third {}/{}", c.op, c.third_candidate);
  return t;
}

namespace {

std::string safe_name(const std::string& s) {
  std::string out;
  for (char ch : s)
    out += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.') ? ch : '_';
  return out.empty() ? std::string("case") : out;
}

}  // namespace

CaseOutcome run_case(const Case& c, const RunOptions& opt) {
  try {
    CaseOutcome o;
    o.c = c;
    o.tensors = materialize(c);
    CaseTensors& t = o.tensors;

    RouteRequest req;
    req.output_dtype = t.output_dtype;
    req.input_dtypes = t.input_dtypes;
    // The row's compare column acts like --compare for that row; the CLI's --compare beats it.
    req.cli_method = opt.cli_method ? opt.cli_method : c.compare;
    if (opt.spec) opt.spec(c.op, req);
    if (!c.precision_tolerances.empty()) {
      req.csv_tol.rtol = c.precision_tolerances[0].first;
      req.csv_tol.ptol = c.precision_tolerances[0].second;
    }
    if (c.absolute_precision) req.csv_tol.atol = c.absolute_precision;
    o.route = route(req);
    if (!opt.cli_method && c.compare && o.route.source == "--compare")
      o.route.source = fmt::format("{} compare column", c.where());

    // An op case's f64 reference becomes a golden in the output dtype (one rounding), since compare()
    // takes tolerances from and needs equal dtypes for golden and actual, like a golden file would be.
    if (c.op_mode && t.golden.dtype != t.output_dtype) {
      std::vector<double> g(t.golden.numel());
      decode_block(t.golden.dtype, t.golden.bytes, 0, g.size(), g.data());
      t.golden =
          make_tensor_f64(t.output_dtype, t.golden.shape, g,
                          fmt::format("<{} f64 reference, rounded to {}>", c.op, dtype_name(t.output_dtype)));
    }
    if (!opt.save_dir.empty() && c.op_mode) {
      auto dir = std::filesystem::path(opt.save_dir) / safe_name(c.name);
      std::filesystem::create_directories(dir);
      for (std::size_t i = 0; i < t.inputs.size(); ++i)
        write_npy((dir / fmt::format("input{}.npy", i)).string(), t.inputs[i]);
      write_npy((dir / "actual.npy").string(), t.actual);
      write_npy((dir / "golden.npy").string(), t.golden);
      if (t.third) write_npy((dir / "third.npy").string(), *t.third);
    }
    CompareInputs in{&t.actual, &t.golden, t.third ? &*t.third : nullptr, c.flat};
    o.result = compare(in, o.route);
    return o;
  } catch (const Error& e) {
    if (c.file.empty()) throw;
    throw Error(fmt::format("{}: {}", c.where(), e.what()));
  } catch (const std::filesystem::filesystem_error& e) {
    throw Error(fmt::format("{}: save dir: expected a writable folder, got {}", c.where(), e.what()));
  }
}

}  // namespace kc
