// The floor plan reader (floor_plan.h, docs/floor.md): every key is checked, an unknown one is refused with
// the closest known key (a misspelt knob would otherwise be a configuration that is silently the baseline).
#include "lab/floor_plan.h"

#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/hash.h"
#include "core/mapped_file.h"
#include "core/suggest.h"
#include "lab/sweep.h"

namespace kc {

namespace fs = std::filesystem;

namespace {

struct PlanReader {
  std::string path;
  std::map<std::string, std::string> placeholders;  // resolved values
  std::string plan_dir, out_dir;

  [[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) const {
    throw_input_error(path, field, expected, got);
  }

  static std::string what(const toml::node* n) {
    if (!n) return "nothing";
    switch (n->type()) {
      case toml::node_type::string: return "a string";
      case toml::node_type::integer: return "an integer";
      case toml::node_type::floating_point: return "a number";
      case toml::node_type::boolean: return "a boolean";
      case toml::node_type::array: return "an array";
      case toml::node_type::table: return "a table";
      default: return "a date or time";
    }
  }

  void only_keys(const toml::table& t, const std::string& at, const std::vector<std::string>& known) const {
    for (auto& [k, v] : t) {
      const std::string key(k.str());
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (auto& w : known) list += (list.empty() ? "" : ", ") + w;
        bad(at.empty() ? key : at + "." + key, "one of the keys " + list,
            "an unknown key \"" + key + "\"" + did_you_mean(key, known));
      }
    }
  }

  // A template with the plan's placeholders resolved; {port} and {config} are left for each start, and
  // {{ / }} stay escaped until then.
  std::string expand(const std::string& text, const std::string& field, bool values_only = false) const {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
        out += c, out += c, ++i;
        continue;
      }
      if (c == '}') bad(field, "balanced braces ({{ and }} for a literal brace)", "a lone \"}\" in \"" + text + "\"");
      if (c != '{') {
        out += c;
        continue;
      }
      const std::size_t end = text.find('}', i);
      if (end == std::string::npos)
        bad(field, "balanced braces ({{ and }} for a literal brace)", "a lone \"{\" in \"" + text + "\"");
      const std::string name = text.substr(i + 1, end - i - 1);
      i = end;
      if (name.rfind("env:", 0) == 0) {
        const char* v = std::getenv(name.substr(4).c_str());
        if (!v) bad(field, "environment variable " + name.substr(4) + " to be set (placeholder {" + name + "})",
                    "it unset");
        out += v;
      } else if (name == "plan_dir") {
        out += plan_dir;
      } else if (name == "out_dir") {
        out += out_dir;
      } else if (!values_only && (name == "port" || name == "config")) {
        out += "{" + name + "}";
      } else if (!values_only && placeholders.count(name)) {
        out += placeholders.at(name);
      } else {
        std::vector<std::string> known{"env:NAME", "plan_dir", "out_dir"};
        if (!values_only) {
          known.insert(known.end(), {"port", "config"});
          for (auto& [k, v] : placeholders) known.push_back(k);
        }
        std::string list;
        for (auto& w : known) list += (list.empty() ? "{" : ", {") + w + "}";
        bad(field,
            fmt::format("a known placeholder ({}{})", list,
                        values_only ? "; a [placeholders] value may use only these" : ""),
            "{" + name + "}" + did_you_mean(name, known));
      }
    }
    return out;
  }

  std::string string(const toml::table& t, const std::string& key, const std::string& at, const std::string& def,
                     bool required = false) const {
    const toml::node* n = t.get(key);
    const std::string field = at.empty() ? key : at + "." + key;
    if (!n) {
      if (required) bad(field, "a string", "nothing");
      return def;
    }
    if (!n->is_string()) bad(field, "a string", what(n));
    return expand(**n->as_string(), field);
  }

  double number(const toml::table& t, const std::string& key, const std::string& at, double def, double lo,
                double hi) const {
    const toml::node* n = t.get(key);
    if (!n) return def;
    const std::string field = at + "." + key;
    if (!n->is_number()) bad(field, fmt::format("a number in [{}, {}]", lo, hi), what(n));
    const double v = n->is_integer() ? static_cast<double>(**n->as_integer()) : **n->as_floating_point();
    if (!(v >= lo && v <= hi)) bad(field, fmt::format("a number in [{}, {}]", lo, hi), fmt::format("{}", v));
    return v;
  }

  int integer(const toml::table& t, const std::string& key, const std::string& at, int def, int lo, int hi) const {
    const toml::node* n = t.get(key);
    if (!n) return def;
    const std::string field = at + "." + key;
    if (!n->is_integer()) bad(field, fmt::format("a whole number in [{}, {}]", lo, hi), what(n));
    const std::int64_t v = **n->as_integer();
    if (v < lo || v > hi) bad(field, fmt::format("a whole number in [{}, {}]", lo, hi), std::to_string(v));
    return static_cast<int>(v);
  }

  std::vector<std::string> strings(const toml::table& t, const std::string& key, const std::string& at) const {
    std::vector<std::string> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    const std::string field = at + "." + key;
    const toml::array* a = n->as_array();
    if (!a) bad(field, "an array of strings", what(n));
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::node* e = a->get(i);
      if (!e->is_string()) bad(fmt::format("{}[{}]", field, i), "a string", what(e));
      out.push_back(expand(**e->as_string(), fmt::format("{}[{}]", field, i)));
    }
    return out;
  }

  std::map<std::string, std::string> env(const toml::table& t, const std::string& key, const std::string& at) const {
    std::map<std::string, std::string> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    const std::string field = at + "." + key;
    const toml::table* e = n->as_table();
    if (!e) bad(field, "a table of NAME = \"value\"", what(n));
    for (auto& [k, v] : *e) {
      const std::string name(k.str());
      if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos)
        bad(field + "." + name, "an environment variable name (no '=')", "\"" + name + "\"");
      if (!v.is_string()) bad(field + "." + name, "a string", what(&v));
      out[name] = expand(**v.as_string(), field + "." + name);
    }
    return out;
  }
};

void read_engine(PlanReader& r, const toml::table& e, FloorPlan& p) {
  p.kind = r.string(e, "kind", "engine", "", true);
  if (p.kind == "server") {
    r.only_keys(e, "engine",
                {"kind", "api", "command", "environment", "host", "port", "url", "health", "startup_timeout",
                 "stop_timeout", "variant", "served_model", "concurrency", "top_logprobs", "phase",
                 "request_timeout", "retries", "prefill_window"});
    p.api = r.string(e, "api", "engine", "vllm");
    if (p.api != "vllm" && p.api != "sglang") r.bad("engine.api", "vllm or sglang", "\"" + p.api + "\"");
    p.command = r.strings(e, "command", "engine");
    if (p.command.empty()) r.bad("engine.command", "a non-empty array of strings (the server's command line)", "nothing");
    p.env = r.env(e, "environment", "engine");
    p.host = r.string(e, "host", "engine", "127.0.0.1");
    p.port = r.integer(e, "port", "engine", 0, 0, 65535);
    p.url = r.string(e, "url", "engine", "http://" + p.host + ":{port}");
    p.health = r.string(e, "health", "engine", p.url + "/health");
    p.startup_timeout_s = r.number(e, "startup_timeout", "engine", 600, 1, 86400);
    p.stop_timeout_s = r.number(e, "stop_timeout", "engine", 30, 1, 3600);
    p.request_timeout_s = r.number(e, "request_timeout", "engine", 300, 1, 86400);
    p.variant = r.string(e, "variant", "engine", "", true);
    p.served_model = r.string(e, "served_model", "engine", "");
    p.concurrency = r.integer(e, "concurrency", "engine", 4, 1, 1024);
    p.top_logprobs = r.integer(e, "top_logprobs", "engine", 20, 1, 1 << 20);
    p.retries = r.integer(e, "retries", "engine", 3, 0, 100);
    p.phase = r.string(e, "phase", "engine", "both");
    if (p.phase != "prefill" && p.phase != "decode" && p.phase != "both")
      r.bad("engine.phase", "prefill, decode or both", "\"" + p.phase + "\"");
    if (e.contains("prefill_window") && p.api != "sglang")
      r.bad("engine.prefill_window", "only with api = \"sglang\"", "a window for \"" + p.api + "\"");
    p.prefill_window = r.integer(e, "prefill_window", "engine", -1, 0, 1 << 20);
  } else if (p.kind == "kerncheck") {
    r.only_keys(e, "engine", {"kind", "model", "tokenizer", "prefill_block"});
    p.model = r.string(e, "model", "engine", "", true);
    p.tokenizer = r.string(e, "tokenizer", "engine", "");
    p.prefill_block = r.integer(e, "prefill_block", "engine", 0, 0, 1 << 30);
  } else {
    r.bad("engine.kind", "server (an inference server over HTTP) or kerncheck (kerncheck's own engine)",
          "\"" + p.kind + "\"");
  }
}

FloorConfiguration read_configuration(const PlanReader& r, const toml::table& c, std::size_t i, const FloorPlan& p) {
  const std::string at = fmt::format("configuration[{}]", i);
  FloorConfiguration f;
  if (p.kind == "server")
    r.only_keys(c, at, {"name", "args", "environment", "concurrency"});
  else
    r.only_keys(c, at, {"name", "variant"});
  f.name = r.string(c, "name", at, "", true);
  if (f.name.empty() || f.name.size() > 64 ||
      f.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != std::string::npos ||
      f.name[0] == '.')
    r.bad(at + ".name", "1 to 64 characters of A-Z a-z 0-9 . _ - (not starting with '.'): it names the run's file",
          "\"" + f.name + "\"");
  if (p.kind == "server") {
    f.args = r.strings(c, "args", at);
    f.env = r.env(c, "environment", at);
    f.concurrency = r.integer(c, "concurrency", at, 0, 1, 1024);
  } else {
    const std::string v = r.string(c, "variant", at, "", true);
    f.variant = canonical_variant(v, r.path + ": " + at + ".variant");
  }
  return f;
}

}  // namespace

FloorPlan read_floor_plan(const std::string& path, const std::map<std::string, std::string>& set,
                          const std::string& out_dir) {
  const std::string text = read_text_file(path, kConfigTextCap, "a floor plan");
  toml::table tbl;
  try {
    tbl = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw_input_error(fmt::format("{}:{}:{}", path, e.source().begin.line, e.source().begin.column), "syntax",
                      "valid TOML (a floor plan)", std::string(e.description()));
  }
  PlanReader r{path, {}, fs::absolute(fs::path(path)).parent_path().string(), out_dir};
  r.only_keys(tbl, "", {"kerncheck", "placeholders", "engine", "configuration"});
  const toml::table* head = tbl["kerncheck"].as_table();
  if (!head) r.bad("[kerncheck]", "a table with format = \"floor-plan\" and version = 1", PlanReader::what(tbl.get("kerncheck")));
  r.only_keys(*head, "kerncheck", {"format", "version"});
  const auto format = (*head)["format"].value<std::string>();
  if (!format || *format != "floor-plan")
    r.bad("kerncheck.format", "\"floor-plan\"", format ? "\"" + *format + "\"" : PlanReader::what(head->get("format")));
  const auto version = (*head)["version"].value<std::int64_t>();
  if (!version || *version != 1)
    r.bad("kerncheck.version", "1", version ? std::to_string(*version) : PlanReader::what(head->get("version")));

  // Placeholders: the plan's, then --set over them; their values may use {env:…}, {plan_dir}, {out_dir}.
  if (const toml::node* n = tbl.get("placeholders")) {
    const toml::table* t = n->as_table();
    if (!t) r.bad("placeholders", "a table of NAME = \"value\"", PlanReader::what(n));
    for (auto& [k, v] : *t) {
      const std::string name(k.str()), field = "placeholders." + name;
      if (name == "port" || name == "config" || name == "plan_dir" || name == "out_dir" || name.rfind("env:", 0) == 0)
        r.bad(field, "a name other than the built-in placeholders (port, config, plan_dir, out_dir, env:…)",
              "\"" + name + "\"");
      if (!v.is_string()) r.bad(field, "a string", PlanReader::what(&v));
      r.placeholders[name] = r.expand(**v.as_string(), field, true);
    }
  }
  for (auto& [k, v] : set) {
    if (!r.placeholders.count(k)) {
      std::vector<std::string> known;
      for (auto& [n, x] : r.placeholders) known.push_back(n);
      fail("--set {}: expected a placeholder of the plan's [placeholders] table ({}), got an unknown name{}", k,
           known.empty() ? "it has none" : fmt::format("{}", fmt::join(known, ", ")), did_you_mean(k, known));
    }
    r.placeholders[k] = r.expand(v, "--set " + k, true);
  }

  FloorPlan p;
  p.path = path;
  p.sha256 = sha256_hex({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
  p.placeholders = r.placeholders;
  const toml::table* e = tbl["engine"].as_table();
  if (!e) r.bad("[engine]", "a table (kind = \"server\" or \"kerncheck\")", PlanReader::what(tbl.get("engine")));
  read_engine(r, *e, p);
  const toml::array* cs = tbl["configuration"].as_array();
  if (!cs || cs->size() < 2)
    r.bad("[[configuration]]", "at least 2 configurations (a floor is the spread between runs)",
          cs ? fmt::format("{}", cs->size()) : PlanReader::what(tbl.get("configuration")));
  std::set<std::string> names;
  for (std::size_t i = 0; i < cs->size(); ++i) {
    const toml::table* c = cs->get(i)->as_table();
    if (!c) r.bad(fmt::format("configuration[{}]", i), "a table", PlanReader::what(cs->get(i)));
    p.configurations.push_back(read_configuration(r, *c, i, p));
    if (!names.insert(p.configurations.back().name).second)
      r.bad(fmt::format("configuration[{}].name", i), "a name no other configuration has",
            "\"" + p.configurations.back().name + "\" again");
  }
  return p;
}

std::string expand_runtime(const std::string& text, int port, const std::string& config) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((text[i] == '{' || text[i] == '}') && i + 1 < text.size() && text[i + 1] == text[i]) {
      out += text[i++];
      continue;
    }
    if (text.compare(i, 6, "{port}") == 0) {
      out += std::to_string(port), i += 5;
    } else if (text.compare(i, 8, "{config}") == 0) {
      out += config, i += 7;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace kc
