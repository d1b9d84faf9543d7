#include "lab/floor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/text_safe.h"
#include "judge/report_format.h"
#include "lab/floor_plan.h"
#include "lab/record_server.h"
#include "lab/server_process.h"
#include "lab/sweep.h"

namespace kc {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void say(const std::string& s) {
  print_safe(stdout, s + "\n");
  std::fflush(stdout);
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return b;
}

// The engine's version from its HTTP API (vLLM: GET /version; SGLang: GET /get_server_info), else "unknown".
std::string engine_version(const std::string& url) {
  for (const char* path : {"/version", "/get_server_info"}) {
    std::string body;
    if (http_get(url + path, 10, &body) != 200) continue;
    const ojson j = ojson::parse(body, nullptr, false);
    if (j.is_object() && j.contains("version") && j["version"].is_string()) return j["version"].get<std::string>();
  }
  return "unknown";
}

// Everything that decides what a server configuration's file holds: a file recorded with this key against
// this golden is kept by a rerun.
std::string server_key(const FloorPlan& p, const FloorConfiguration& c, const std::string& golden_checksum) {
  std::vector<std::string> argv = p.command;
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  std::map<std::string, std::string> env = p.env;
  for (auto& [k, v] : c.env) env[k] = v;
  ojson key{{"golden", golden_checksum},     {"command", argv},
            {"environment", env},            {"api", p.api},
            {"url", p.url},                  {"served_model", p.served_model},
            {"variant", p.variant},          {"concurrency", c.concurrency ? c.concurrency : p.concurrency},
            {"top_logprobs", p.top_logprobs}, {"phase", p.phase}};
  if (p.api == "sglang") key["prefill_window"] = p.prefill_window;
  return key.dump();
}

ojson configuration_json(const FloorPlan& p, const FloorConfiguration& c) {
  if (p.kind == "kerncheck") return {{"variant", c.variant}};
  return {{"args", c.args},
          {"environment", c.env},
          {"concurrency", c.concurrency ? c.concurrency : p.concurrency}};
}

// A finished file of this configuration (intact, this golden, this key): its metadata, else nothing.
std::optional<CandidateMeta> kept_server_run(const std::string& file, const std::string& key, const Golden& g) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  std::optional<CandidateMeta> meta;
  try {
    Candidate c = read_candidate(file);
    auto it = c.meta.extra.find("floor_key");
    if (c.meta.golden_checksum == g.meta.checksum && it != c.meta.extra.end() && it->second == key) meta = c.meta;
  } catch (const Error&) {
  }
  forget_input(file);  // read only to decide whether to record it again
  return meta;
}

struct RunTimes {
  double start = 0, record = 0;
  bool kept = false;
};

RunTimes record_server_run(const FloorOptions& o, const FloorPlan& p, const FloorConfiguration& c, const Golden& g,
                           const std::string& file, const std::string& log, FloorRun& run) {
  RunTimes t;
  const std::string key = server_key(p, c, g.meta.checksum);
  if (auto kept = kept_server_run(file, key, g)) {
    run.engine_version = kept->extra.count("engine_version") ? kept->extra.at("engine_version") : "unknown";
    run.hardware = kept->extra.count("hardware") ? kept->extra.at("hardware") : "";
    t.kept = true;
    return t;
  }
  ServerSpec s;
  s.name = fmt::format("{}: configuration {}", o.plan, c.name);
  s.host = p.host;
  s.port = p.port ? p.port : free_port(p.host);
  for (auto& a : p.command) s.argv.push_back(expand_runtime(a, s.port, c.name));
  for (auto& a : c.args) s.argv.push_back(expand_runtime(a, s.port, c.name));
  for (auto& [k, v] : p.env) s.env[k] = expand_runtime(v, s.port, c.name);
  for (auto& [k, v] : c.env) s.env[k] = expand_runtime(v, s.port, c.name);
  s.health_url = expand_runtime(p.health, s.port, c.name);
  s.startup_timeout_s = p.startup_timeout_s;
  s.stop_timeout_s = p.stop_timeout_s;
  s.log = log;
  {
    std::ofstream l(log, std::ios::app);
    l << "== kerncheck floor " << now_text() << ": configuration " << c.name << ", port " << s.port << "\n== "
      << fmt::format("{}", fmt::join(s.argv, " ")) << "\n";
    for (auto& [k, v] : s.env) l << "== " << k << "=" << v << "\n";
  }
  const std::string url = expand_runtime(p.url, s.port, c.name);
  say(fmt::format("  starting the server on port {} (log {})", s.port, log));
  const auto t0 = Clock::now();
  ServerProcess server(s);  // stopped on every way out of this function
  server.wait_healthy();
  t.start = seconds(t0);
  run.engine_version = engine_version(url);
  say(fmt::format("  healthy after {:.1f} s (engine version {}); recording", t.start, run.engine_version));
  RecordServerOptions r;
  r.url = url;
  r.api = p.api;
  r.served_model = p.served_model;
  r.golden = o.golden;
  r.out = file;
  r.command_line = fmt::format("{} (configuration {})", o.command_line, c.name);
  r.variant = p.variant;
  r.top_logprobs = p.top_logprobs;
  r.phase = p.phase;
  r.prefill_window = p.prefill_window;
  r.concurrency = c.concurrency ? c.concurrency : p.concurrency;
  r.timeout_s = p.request_timeout_s;
  r.retries = p.retries;
  r.extra = {{"floor_key", key},
             {"floor_configuration", c.name},
             {"engine_version", run.engine_version},
             {"hardware", run.hardware}};
  const auto t1 = Clock::now();
  try {
    record_with_server(r);
  } catch (const Error& e) {
    if (!server.alive())
      fail("{}: server: expected it to run until the recording ends, got a server that ended during the "
           "recording ({}); finished segments are kept in {}.partial/ (rerun to resume); its log {} ends:{}\n  "
           "the recording's error: {}",
           s.name, server.exit_status(), file, log, server.log_tail(), e.what());
    throw;
  }
  t.record = seconds(t1);
  server.stop();
  say(fmt::format("  recorded in {:.1f} s; server stopped", t.record));
  return t;
}

RunTimes record_kerncheck_run(const FloorPlan& p, const FloorConfiguration& c, const std::string& golden,
                              const std::string& file) {
  RunTimes t;
  const auto t0 = Clock::now();
  // The path `kerncheck demo` and `sweep` record their runs with: the same files, bit for bit.
  t.kept = record_candidate_cached({p.model, golden, file, c.variant, p.tokenizer, p.prefill_block});
  t.record = seconds(t0);
  return t;
}

void print_summary(const FloorManifest& m) {
  using report::g3;
  say(fmt::format("\n{:<24} {:<24} {:>10}", "run", "same bits as", "KL mean"));
  std::map<std::string, std::string> first;
  for (const FloorRun& r : m.runs) {
    auto [it, fresh] = first.emplace(r.tensors, r.name);
    say(fmt::format("{:<24} {:<24} {:>10}", r.name, fresh ? "-" : it->second, g3(r.kl_mean)));
  }
  double lo = INFINITY, hi = 0;
  for (const FloorPair& p : m.spread.pairs) lo = std::min(lo, p.kl_mean), hi = std::max(hi, p.kl_mean);
  if (!m.spread.pairs.empty()) say(fmt::format("KL between runs (pairwise mean): {} … {}", g3(lo), g3(hi)));
  say(m.spread.sentence);
}

}  // namespace

std::string machine_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string model, flags;
  for (std::string l; std::getline(in, l);) {
    if (model.empty() && l.rfind("model name", 0) == 0) model = l.substr(l.find(':') + 2);
    if (flags.empty() && l.rfind("flags", 0) == 0) flags = " " + l.substr(l.find(':') + 1) + " ";
  }
  std::string s = model.empty() ? "unknown CPU" : model;
  s += fmt::format(", {} CPUs", std::thread::hardware_concurrency());
  if (flags.find(" avx512f ") != std::string::npos)
    s += ", AVX-512";
  else if (flags.find(" avx2 ") != std::string::npos)
    s += ", AVX2";
  if (flags.find(" amx_tile ") != std::string::npos) s += ", AMX";
  return s;
}

FloorManifest run_floor(const FloorOptions& o) {
  const std::string out = fs::absolute(o.out_dir).lexically_normal().string();
  const FloorPlan p = read_floor_plan(o.plan, o.set, out);
  Golden golden = read_golden(o.golden);
  std::error_code ec;
  fs::create_directories(fs::path(out) / "logs", ec);
  if (ec) throw_input_error(out, "-o", "a folder kerncheck can create and write", ec.message());
  check_output_path((fs::path(out) / "floor.json").string());

  FloorManifest m;
  m.plan = o.plan;
  m.plan_sha256 = p.sha256;
  m.golden_path = o.golden;
  m.golden_checksum = golden.meta.checksum;
  m.model = golden.meta.identity.model;
  m.corpus = golden.meta.identity.corpus;
  m.served_model = p.kind == "server" ? p.served_model : "";
  const std::string hardware = machine_description();
  const auto t_all = Clock::now();
  double start_s = 0, record_s = 0;
  for (std::size_t i = 0; i < p.configurations.size(); ++i) {
    const FloorConfiguration& c = p.configurations[i];
    FloorRun run;
    run.name = c.name;
    run.file = c.name + ".kcc";
    run.path = (fs::path(out) / run.file).string();
    run.hardware = hardware;
    run.configuration = configuration_json(p, c);
    say(fmt::format("[{}/{}] {}{}", i + 1, p.configurations.size(), c.name,
                    p.kind == "kerncheck" ? " (variant " + c.variant + ")" : ""));
    RunTimes t;
    if (p.kind == "server") {
      t = record_server_run(o, p, c, golden, run.path, (fs::path(out) / "logs" / (c.name + ".log")).string(), run);
    } else {
      t = record_kerncheck_run(p, c, o.golden, run.path);
      run.engine_version = "kerncheck (this build)";
    }
    if (t.kept) say(fmt::format("  kept {} (recorded earlier by this configuration)", run.path));
    start_s += t.start, record_s += t.record;
    run.configuration["seconds"] = {{"start", t.start}, {"record", t.record}, {"kept", t.kept}};
    m.runs.push_back(std::move(run));
  }
  m.spread = measure_floor_spread(golden, o.golden, m.runs, o.judge);
  m.engine = m.runs.front().made_by.engine;
  m.variant = m.runs.front().made_by.variant;
  const std::string manifest = (fs::path(out) / "floor.json").string();
  write_floor_manifest(manifest, m);
  print_summary(m);
  say(fmt::format("wrote {}: {} runs; {:.1f} s in all (server starts {:.1f} s, recording {:.1f} s)", manifest,
                  m.runs.size(), seconds(t_all), start_s, record_s));
  return m;
}

}  // namespace kc
