// A floor plan (TOML, docs/floor.md): how to run the baseline engine, and a list of named configurations
// that should not change its math. `kerncheck floor` records one run per configuration and writes the floor
// manifest (judge/floor_manifest.h). Two engines:
//   server     an inference server (vLLM, SGLang) started from a command template, one configuration at a
//              time (its arguments and environment added), recorded over HTTP (record --server);
//   kerncheck  kerncheck's own engine: each configuration is a lab variant (docs/lab.md: order=, attn=),
//              recorded as `record --model … --variant` does.
// Templates (command, arguments, environment, URLs, model) take placeholders: {port}, {config} (the
// configuration's name), {plan_dir}, {out_dir}, {env:NAME} (an environment variable that must be set), and
// every key of [placeholders] (overridden by `kerncheck floor --set NAME=VALUE`); {{ and }} are braces.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace kc {

struct FloorConfiguration {
  std::string name;
  std::vector<std::string> args;           // server: added to the command (resolved)
  std::map<std::string, std::string> env;  // server: on top of the engine's environment (resolved)
  int concurrency = 0;                     // server: the client's segments in flight (0: the engine's)
  std::string variant;                     // kerncheck: the lab variant (canonical form)
};

struct FloorPlan {
  std::string path, sha256;  // the plan file and the SHA-256 of its bytes
  std::string kind;          // "server" | "kerncheck"
  // server
  std::vector<std::string> command;        // resolved per configuration (placeholders need {config})
  std::map<std::string, std::string> env;  // resolved per configuration
  std::string api = "vllm", url, health, variant, served_model, host = "127.0.0.1";
  int port = 0;  // 0: a free port chosen when each server starts
  double startup_timeout_s = 600, stop_timeout_s = 30, request_timeout_s = 300;
  int concurrency = 4, top_logprobs = 20, retries = 3;
  std::string phase = "both";
  int prefill_window = -1;  // SGLang: prefill depths per request (record --prefill-window; -1 its default)
  // kerncheck
  std::string model, tokenizer;
  int prefill_block = 0;
  std::vector<FloorConfiguration> configurations;
  // Unresolved templates, per configuration (index in `configurations`): expand() resolves them.
  std::map<std::string, std::string> placeholders;
};

// Reads and validates a plan (exit 3 "PLAN: FIELD: expected …, got …"); `set` overrides placeholders
// (`--set NAME=VALUE`); out_dir is {out_dir}. Every template is resolved here with {port} and {config}
// standing for themselves; the server runner resolves those two per start (expand_runtime).
FloorPlan read_floor_plan(const std::string& path, const std::map<std::string, std::string>& set,
                          const std::string& out_dir);

// {port} and {config} in a template that read_floor_plan left for the start of one configuration.
std::string expand_runtime(const std::string& text, int port, const std::string& config);

}  // namespace kc
