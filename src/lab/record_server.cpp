// Recording from a running vLLM or SGLang server: see record_server.h and docs/engines.md.
#include "lab/record_server.h"

#include <curl/curl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/text_safe.h"
#include "golden/corpus.h"
#include "golden/engine_logprobs.h"
#include "golden/golden.h"
#include "golden/importers.h"
#include "golden/record_topk.h"
#include "io/safetensors.h"
#include "lab/record_model.h"

namespace kc {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---- HTTP (libcurl) ---------------------------------------------------------------------------------

struct HttpResult {
  long status = 0;     // 0: no HTTP answer (see error)
  std::string body, error;
  bool too_large = false;  // the body passed the size limit: reading stopped there
};

// The body, up to a limit: a server that streams without end stops at the limit, not at the memory's.
struct BodySink {
  HttpResult* r;
  std::size_t limit;
};

std::size_t on_body(char* p, std::size_t size, std::size_t n, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  if (sink->r->body.size() + size * n > sink->limit) {
    sink->r->too_large = true;
    return 0;  // libcurl stops the transfer (CURLE_WRITE_ERROR)
  }
  sink->r->body.append(p, size * n);
  return size * n;
}

class Http {
 public:
  Http() : h_(curl_easy_init()) {
    if (!h_) KC_ASSERT(false, "libcurl: curl_easy_init failed");  // out of memory, not an input
  }
  ~Http() { curl_easy_cleanup(h_); }
  Http(const Http&) = delete;
  Http& operator=(const Http&) = delete;

  // GET when body is null, else POST of JSON. The whole exchange, however slowly the server trickles its
  // bytes, ends after timeout_s; a body longer than max_bytes is cut off (too_large).
  HttpResult call(const std::string& url, const std::string* body, double timeout_s, std::size_t max_bytes) {
    HttpResult r;
    BodySink sink{&r, max_bytes};
    curl_easy_reset(h_);
    curl_easy_setopt(h_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h_, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
    curl_easy_setopt(h_, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
    curl_easy_setopt(h_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min(timeout_s, 30.0) * 1000));
    curl_easy_setopt(h_, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_bytes));  // a declared length
    curl_easy_setopt(h_, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h_, CURLOPT_WRITEDATA, &sink);
    curl_slist* headers = nullptr;
    if (body) {
      headers = curl_slist_append(headers, "Content-Type: application/json");
      curl_easy_setopt(h_, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(h_, CURLOPT_POSTFIELDS, body->data());
      curl_easy_setopt(h_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    CURLcode rc = curl_easy_perform(h_);
    if (rc == CURLE_FILESIZE_EXCEEDED) r.too_large = true;
    if (rc == CURLE_OK)
      curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &r.status);
    else
      r.error = curl_easy_strerror(rc);
    curl_slist_free_all(headers);
    return r;
  }

 private:
  CURL* h_;
};

std::string excerpt(const std::string& s) {
  std::string e = s.substr(0, 300);
  for (auto& c : e)
    if (c == '\n' || c == '\r') c = ' ';
  return s.size() > 300 ? e + "…" : e;
}

std::size_t max_response_bytes(const RecordServerOptions& o) {
  return static_cast<std::size_t>(o.max_response_mb) << 20;
}

// One request with retries: HTTP 5xx / 429, network errors and timeouts are retried with doubling
// back-off; any other status is final. Throws kc::Error (exit 3) naming the URL and the last failure.
std::string request(Http& http, const std::string& url, const std::string* body, const RecordServerOptions& o,
                    const std::atomic<bool>* stop = nullptr) {
  std::string last;
  double wait = o.backoff_s;
  for (int attempt = 0; attempt <= o.retries; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      wait *= 2;
    }
    if (stop && stop->load()) fail("{}: stopped (another request failed)", url);
    HttpResult r = http.call(url, body, o.timeout_s, max_response_bytes(o));
    if (r.too_large)  // not retried: the same request gets the same answer
      throw_input_error(url, body ? "POST response size" : "GET response size",
                        fmt::format("at most {} MiB (raise it with --max-response-mb)", o.max_response_mb),
                        fmt::format("more (stopped reading after {} bytes)", r.body.size()));
    if (r.status == 200) return std::move(r.body);
    if (r.status == 0)
      last = fmt::format("no HTTP response ({})", r.error);
    else
      last = fmt::format("HTTP {}: {}", r.status, excerpt(r.body));
    const bool transient = r.status == 0 || r.status == 429 || r.status >= 500;
    if (!transient) break;
  }
  throw_input_error(url, body ? "POST" : "GET",
                    fmt::format("HTTP 200 (tried {} time(s), --timeout {} s)", o.retries + 1, o.timeout_s), last);
}

// ---- What to ask for, per segment ---------------------------------------------------------------------

struct SegmentPlan {
  std::int32_t index = 0;
  std::vector<std::int32_t> tokens;  // t_0 … t_D
  std::int64_t n_prefill = 0;        // depths 1 … n_prefill are the golden's prefill positions
  // Candidate mode: the golden's top-k ids at depth d are ref_ids[(d−1)·k, d·k) (SGLang asks for them by
  // name in token_ids_logprob); empty in golden mode.
  std::vector<std::int32_t> ref_ids;
  int k = 0;
  std::int64_t start = 0;  // the file position of depth 1 (messages)
  std::int64_t vocab = 0;  // ids the engine reports must be below it
  std::int64_t depth() const { return static_cast<std::int64_t>(tokens.size()) - 1; }
};

bool wants_prefill(const std::string& phase, const SegmentPlan& p) {
  return phase == "prefill" || (phase == "both" && p.n_prefill > 0);
}
// Depth d is scored by a decode step.
bool is_decode(const std::string& phase, const SegmentPlan& p, std::int64_t d) {
  return phase == "decode" || (phase == "both" && d > p.n_prefill);
}

std::string prefill_body(const RecordServerOptions& o, const std::string& model, const SegmentPlan& p) {
  return json{{"model", model},         {"prompt", p.tokens}, {"max_tokens", 1},
              {"temperature", 0},       {"prompt_logprobs", o.top_logprobs},
              {"return_token_ids", true}}
      .dump();
}

// SGLang (POST /generate, io_struct.py GenerateReqInput): the ids to ask for by name at depths
// [d0, d1]: the union of the golden's top-k there, plus the corpus tokens (decode rows need t_d listed).
std::vector<std::int32_t> sglang_named_ids(const SegmentPlan& p, std::int64_t d0, std::int64_t d1) {
  std::vector<std::int32_t> ids;
  for (std::int64_t d = d0; d <= d1; ++d) {
    ids.push_back(p.tokens[d]);
    if (!p.ref_ids.empty())
      ids.insert(ids.end(), p.ref_ids.begin() + (d - 1) * p.k, p.ref_ids.begin() + d * p.k);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// The prefill requests of a segment, each scoring depths [a, b]. vLLM: one, the whole segment (its prompt
// log-probs list each position's own top-K', so a response is linear in depth). SGLang: the depths read
// from prefill rows (all for --phase prefill, the golden's prefill positions for both), W at a time: SGLang
// returns every id of token_ids_logprob at every scored position, so one request for depth D would list
// up to (k+1)·D ids at D positions; a window of W lists at most (k+1)·W at W.
struct PrefillWindow {
  std::int64_t a = 1, b = 0;
};
std::vector<PrefillWindow> prefill_windows(const RecordServerOptions& o, const SegmentPlan& p) {
  if (!wants_prefill(o.phase, p)) return {};
  if (o.api != "sglang") return {{1, p.depth()}};
  const std::int64_t last = o.phase == "prefill" ? p.depth() : p.n_prefill;
  const std::int64_t w = sglang_prefill_window(o) ? sglang_prefill_window(o) : last;  // 0: one window
  std::vector<PrefillWindow> out;
  for (std::int64_t a = 1; a <= last; a += w) out.push_back({a, std::min(last, a + w - 1)});
  return out;
}

// Prefill of depths [a, b]: the prompt t_0 … t_b with logprob_start_len a − 1, so meta_info.input_* hold
// the rows of depths a … b after SGLang's null pad at entry 0 (token a − 1). SGLang's radix cache may
// serve at most the first a − 1 tokens (Req: max_prefix_len ≤ logprob_start_len), so each window after
// the first computes its own tokens over the cached prefix as one extend. max_new_tokens 1, the smallest
// generation.
std::string sglang_prefill_body(const RecordServerOptions& o, const SegmentPlan& p, PrefillWindow w) {
  json j{{"input_ids", std::vector<std::int32_t>(p.tokens.begin(), p.tokens.begin() + w.b + 1)},
         {"sampling_params", {{"max_new_tokens", 1}, {"temperature", 0}}},
         {"return_logprob", true},
         {"logprob_start_len", w.a - 1},
         {"top_logprobs_num", o.top_logprobs},
         {"return_text_in_logprobs", false},
         {"return_prompt_token_ids", true}};
  if (!p.ref_ids.empty()) j["token_ids_logprob"] = sglang_named_ids(p, w.a, w.b);
  return j.dump();
}

// Decode step at depth d: prompt t_0 … t_{d−1}, default logprob_start_len (output log-probs only, so the
// radix cache serves the prefix), one generated token whose distribution is depth d's row
// (meta_info.output_*); t_d and the golden's ids there asked for by name.
std::string sglang_decode_body(const RecordServerOptions& o, const SegmentPlan& p, std::int64_t d) {
  std::vector<std::int32_t> prompt(p.tokens.begin(), p.tokens.begin() + d);
  return json{{"input_ids", prompt},
              {"sampling_params", {{"max_new_tokens", 1}, {"temperature", 0}}},
              {"return_logprob", true},
              {"top_logprobs_num", o.top_logprobs},
              {"token_ids_logprob", sglang_named_ids(p, d, d)},
              {"return_text_in_logprobs", false},
              {"return_prompt_token_ids", true}}
      .dump();
}

std::string decode_body(const RecordServerOptions& o, const std::string& model, const SegmentPlan& p,
                        std::int64_t d) {
  std::vector<std::int32_t> prompt(p.tokens.begin(), p.tokens.begin() + d);
  return json{{"model", model},
              {"prompt", prompt},
              {"max_tokens", 1},
              {"temperature", 0},
              {"logprobs", o.top_logprobs},
              {"allowed_token_ids", {p.tokens[d]}},
              {"return_token_ids", true},
              {"return_tokens_as_token_ids", true}}
      .dump();
}

// ---- Reading the responses ------------------------------------------------------------------------------

struct DecodeRow {
  std::vector<std::pair<std::int32_t, float>> entries;
  float bound = 0;
  std::int64_t prompt_tokens = 0, cached_tokens = -1;  // −1: not reported
};

std::int32_t id_of_token_string(const std::string& s, const std::string& where, const std::string& field) {
  const std::string pre = "token_id:";
  std::int32_t id = -1;
  if (s.rfind(pre, 0) == 0) {
    const char* b = s.data() + pre.size();
    const char* e = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(b, e, id);
    if (ec != std::errc() || ptr != e || id < 0) id = -1;
  }
  if (id < 0)
    throw_input_error(where, field, "a token written as \"token_id:N\" (return_tokens_as_token_ids)",
                      "\"" + excerpt(s) + "\"");
  return id;
}

// A response as JSON. An object that names a key twice is refused: the parser would keep one of the two
// values without a word (a decode step's {"token_id:650": …, "token_id:650": …}). So is nesting deeper than
// the importers read (64): its values are dropped while parsing, never held or printed.
json parse_json(const std::string& text, const std::string& where) {
  std::vector<std::unordered_set<std::string>> keys;  // per open object, its keys so far
  std::string duplicate;
  bool too_deep = false;
  auto check = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth > 64) return !(too_deep = true);
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    if (ev == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (ev == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json doc;
  try {
    doc = json::parse(text, check);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw_input_error(where, "(response body)", "a complete JSON document",
                      fmt::format("{} ({} bytes)", e.what(), text.size()));
  }
  if (too_deep) throw_input_error(where, "(response body)", "JSON nested at most 64 levels", "deeper");
  if (!duplicate.empty())
    throw_input_error(where, "(response body)", "each key once per JSON object",
                      fmt::format("\"{}\" twice", excerpt(duplicate)));
  return doc;
}

const json& field(const json& j, const char* key, const std::string& where, const std::string& path,
                  const char* expected) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null())
    throw_input_error(where, path.empty() ? key : path + "." + key, expected, "none");
  return j.at(key);
}

// The token ids the engine echoes (JSON field `path`) must be the ones sent; names the first difference.
void check_ids_echoed(const json& ids, std::span<const std::int32_t> sent, const std::string& where,
                      const std::string& path) {
  std::vector<std::int32_t> got;
  try {
    got = ids.get<std::vector<std::int32_t>>();
  } catch (const json::exception&) {
    throw_input_error(where, path, "a list of token ids", excerpt(ids.dump()));
  }
  std::size_t i = 0;
  while (i < got.size() && i < sent.size() && got[i] == sent[i]) ++i;
  if (i != got.size() || i != sent.size())
    throw_input_error(where, fmt::format("{}[{}]", path, i),
                      fmt::format("the {} sent token ids echoed ({} at index {})", sent.size(),
                                  i < sent.size() ? std::to_string(sent[i]) : "end", i),
                      i < got.size() ? std::to_string(got[i]) : fmt::format("end after {} ids", got.size()));
}

// The prompt vLLM says it was given must be the one sent.
void check_echo(const json& choice, std::span<const std::int32_t> sent, const std::string& where) {
  check_ids_echoed(field(choice, "prompt_token_ids", where, "choices[0]",
                         "the prompt's token ids (request return_token_ids: true)"),
                   sent, where, "choices[0].prompt_token_ids");
}

// One decode step: the generated (forced) token t_d and the top-K' of its distribution.
DecodeRow read_decode(const std::string& text, const SegmentPlan& p, std::int64_t d, const std::string& where) {
  json doc = parse_json(text, where);
  const json& choices = field(doc, "choices", where, "", "a list with one choice");
  if (!choices.is_array() || choices.size() != 1)
    throw_input_error(where, "choices", "a list with one choice", excerpt(choices.dump()));
  const json& ch = choices[0];
  check_echo(ch, std::span<const std::int32_t>(p.tokens).first(d), where);
  const json& lp = field(ch, "logprobs", where, "choices[0]", "the generated token's log-probs (logprobs: K')");
  const json& toks = field(lp, "tokens", where, "choices[0].logprobs", "a list of one token");
  const json& tops = field(lp, "top_logprobs", where, "choices[0].logprobs", "a list of one object");
  if (!toks.is_array() || toks.size() != 1 || !toks[0].is_string())
    throw_input_error(where, "choices[0].logprobs.tokens", "one generated token (max_tokens: 1)",
                      excerpt(toks.dump()));
  const std::int32_t want = p.tokens[d];
  const std::int32_t got = id_of_token_string(toks[0].get<std::string>(), where, "choices[0].logprobs.tokens[0]");
  if (got != want)
    throw_input_error(where, "choices[0].logprobs.tokens[0]",
                      fmt::format("the forced corpus token {} (allowed_token_ids; depth {})", want, d),
                      std::to_string(got));
  if (!tops.is_array() || tops.size() != 1 || !tops[0].is_object())
    throw_input_error(where, "choices[0].logprobs.top_logprobs", "a list of one {token: logprob} object",
                      excerpt(tops.dump()));
  DecodeRow row;
  float lo = std::numeric_limits<float>::infinity();
  for (auto& [key, v] : tops[0].items()) {
    std::string path = "choices[0].logprobs.top_logprobs[0]." + key;
    std::int32_t id = id_of_token_string(key, where, path);
    float x = std::numeric_limits<float>::quiet_NaN();  // null: how pydantic writes a non-finite float
    if (!v.is_null()) {
      if (!v.is_number()) throw_input_error(where, path, "a log-prob (number)", excerpt(v.dump()));
      x = v.get<float>();
      if (x > 0) throw_input_error(where, path, "a log-prob ≤ 0", fmt::format("{}", x));
    }
    if (std::any_of(row.entries.begin(), row.entries.end(), [&](auto& e) { return e.first == id; }))
      throw_input_error(where, path, fmt::format("token id {} listed once (\"token_id:650\" and \"token_id:0650\" "
                                                 "name one token)", id),
                        "listed twice");
    row.entries.push_back({id, x});
    if (id != want && x == x) lo = std::min(lo, x);
  }
  if (std::none_of(row.entries.begin(), row.entries.end(), [&](auto& e) { return e.first == want; }))
    throw_input_error(where, "choices[0].logprobs.top_logprobs[0]",
                      fmt::format("an entry for the generated token {}", want), "none");
  // Every unlisted id ranks below the listed top-K' (the forced token may be an extra entry).
  row.bound = lo == std::numeric_limits<float>::infinity() ? 0.0f : lo;
  if (doc.contains("usage") && doc["usage"].is_object()) {
    const json& u = doc["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
      row.prompt_tokens = u["prompt_tokens"].get<std::int64_t>();
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object() &&
        u["prompt_tokens_details"].contains("cached_tokens") &&
        u["prompt_tokens_details"]["cached_tokens"].is_number_integer())
      row.cached_tokens = u["prompt_tokens_details"]["cached_tokens"].get<std::int64_t>();
  }
  return row;
}

// ---- SGLang responses (tokenizer_manager.py: {"text", "output_ids", "meta_info", "prompt_token_ids"?}) ------

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// prompt_token_ids (SGLang with return_prompt_token_ids) must be what was sent; older servers omit it.
void check_sglang_prompt_ids(const json& doc, std::span<const std::int32_t> sent, const std::string& where) {
  if (!doc.contains("prompt_token_ids") || doc["prompt_token_ids"].is_null()) return;
  check_ids_echoed(doc["prompt_token_ids"], sent, where, "prompt_token_ids");
}

const json& sglang_meta(const json& doc, const std::string& where) {
  if (!doc.is_object()) throw_input_error(where, "(response body)", "a /generate response object", excerpt(doc.dump()));
  return field(doc, "meta_info", where, "", "the /generate response's meta_info object");
}

std::int64_t sglang_count(const json& meta, const char* key, const std::string& where) {
  const json& v = field(meta, key, where, "meta_info", "a token count");
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
    throw_input_error(where, std::string("meta_info.") + key, "a token count (integer ≥ 0)", excerpt(v.dump()));
  return v.get<std::int64_t>();
}

// A prefill response for depths [a, b]: the rows of prompt tokens a − 1 … b (parse_sglang_logprobs, the
// importer's reader), with the echoed prompt (input_token_logprobs' ids, prompt_tokens, prompt_token_ids)
// checked against t_0 … t_b.
EngineSequence read_sglang_prefill(const std::string& text, const SegmentPlan& p, PrefillWindow w,
                                   const std::string& where) {
  json doc = parse_json(text, where);
  const json& meta = sglang_meta(doc, where);
  const std::int64_t prompt_tokens = sglang_count(meta, "prompt_tokens", where);
  if (prompt_tokens != w.b + 1)
    throw_input_error(where, "meta_info.prompt_tokens", fmt::format("{} (the tokens sent)", w.b + 1),
                      std::to_string(prompt_tokens));
  check_sglang_prompt_ids(doc, std::span<const std::int32_t>(p.tokens).first(w.b + 1), where);
  EngineDump d = parse_sglang_logprobs(bytes_of(text), where, SglangSide::input);
  if (d.sequences.size() != 1)
    throw_input_error(where, "(response body)", "one /generate response", std::to_string(d.sequences.size()));
  EngineSequence seq = std::move(d.sequences[0]);
  const std::int64_t n = w.b - w.a + 2;
  if (seq.first_token != w.a - 1 || static_cast<std::int64_t>(seq.size()) != n)
    throw_input_error(where, "meta_info.input_token_logprobs",
                      fmt::format("{} entries from prompt token {} (logprob_start_len {})", n, w.a - 1, w.a - 1),
                      fmt::format("{} entries from prompt token {}", seq.size(), seq.first_token));
  for (std::int64_t i = 0; i < n; ++i)
    if (seq.tokens[i] != p.tokens[w.a - 1 + i])
      throw_input_error(where, fmt::format("meta_info.input_token_logprobs[{}][1]", i),
                        fmt::format("the sent token {}{}", p.tokens[w.a - 1 + i],
                                    seq.tokens[i] == 0 ? " (SGLang echoes the id vocab−1 as 0: such a corpus is not "
                                                         "supported)"
                                                       : ""),
                        std::to_string(seq.tokens[i]));
  return seq;
}

// One decode step: the generated token's row (meta_info.output_*, the same reader), which must list t_d
// (asked for by name), the prompt length and the cached-token count (meta_info.cached_tokens).
DecodeRow read_sglang_decode(const std::string& text, const SegmentPlan& p, std::int64_t d, const std::string& where) {
  json doc = parse_json(text, where);
  const json& meta = sglang_meta(doc, where);
  DecodeRow row;
  row.prompt_tokens = sglang_count(meta, "prompt_tokens", where);
  if (row.prompt_tokens != d)
    throw_input_error(where, "meta_info.prompt_tokens", fmt::format("{} (the tokens sent)", d),
                      std::to_string(row.prompt_tokens));
  check_sglang_prompt_ids(doc, std::span<const std::int32_t>(p.tokens).first(d), where);
  row.cached_tokens = sglang_count(meta, "cached_tokens", where);
  EngineDump dump = parse_sglang_logprobs(bytes_of(text), where, SglangSide::output);
  if (dump.sequences.size() != 1 || dump.sequences[0].size() != 1)
    throw_input_error(where, "meta_info.output_token_logprobs", "one generated token (max_new_tokens 1)",
                      dump.sequences.size() == 1 ? fmt::format("{} tokens", dump.sequences[0].size())
                                                 : fmt::format("{} responses", dump.sequences.size()));
  const EngineSequence& q = dump.sequences[0];
  for (auto j = q.row_begin[0]; j < q.row_begin[1]; ++j) row.entries.push_back({q.ids[j], q.log_probs[j]});
  row.bound = q.bound[0];
  const std::int32_t want = p.tokens[d];
  if (std::none_of(row.entries.begin(), row.entries.end(), [&](auto& e) { return e.first == want; }))
    throw_input_error(where, "meta_info.output_token_ids_logprobs[0]",
                      fmt::format("an entry for the corpus token {} (asked for in token_ids_logprob; depth {})",
                                  want, d),
                      "none");
  return row;
}

struct CacheStats {
  std::int64_t decode_requests = 0, prompt_tokens = 0, cached_tokens = 0, unreported = 0;
  void add(const CacheStats& c) {
    decode_requests += c.decode_requests, prompt_tokens += c.prompt_tokens;
    cached_tokens += c.cached_tokens, unreported += c.unreported;
  }
};

// A row from the engine must be a distribution's: ids distinct and in [0, vocab), log-probs ≤ 0 (null, the
// engine's non-finite value, is kept as NaN and counted by the judge), and a probability mass over the
// listed ids of at most 1 + kTopkMassTol (f32 rounding). Refused at the response, naming it.
void check_row(const std::vector<std::pair<std::int32_t, float>>& entries, const SegmentPlan& p, std::int64_t d,
               const std::string& where) {
  const std::string at = fmt::format("position {} (depth {})", p.start + d - 1, d);
  std::unordered_set<std::int32_t> ids;
  double mass = 0;
  for (const auto& [id, lp] : entries) {
    if (id < 0 || id >= p.vocab)
      throw_input_error(where, at + ": token id", fmt::format("an id in [0, {}) (the vocabulary)", p.vocab),
                        std::to_string(id));
    if (!ids.insert(id).second)
      throw_input_error(where, fmt::format("{}: token id {}", at, id), "each id listed once", "listed twice");
    if (lp > 0)
      throw_input_error(where, fmt::format("{}: log-prob of token {}", at, id), "a log-prob ≤ 0",
                        fmt::format("{}", lp));
    if (std::isfinite(lp)) mass += std::exp(static_cast<double>(lp));
  }
  if (mass > 1.0 + kTopkMassTol)
    throw_input_error(where, at + ": probability mass",
                      fmt::format("at most 1 (+{}) over the {} listed ids", kTopkMassTol, entries.size()),
                      fmt::format("{:.6g}", mass));
}

const json& one_choice(const json& doc, const std::string& where) {
  const json& choices = field(doc, "choices", where, "", "a list with one choice");
  if (!choices.is_array() || choices.size() != 1 || !choices[0].is_object())
    throw_input_error(where, "choices", "a list with one choice", excerpt(choices.dump()));
  return choices[0];
}

EngineSequence segment_rows(const RecordServerOptions& o, const SegmentPlan& p, const std::vector<std::string>& lines,
                            const std::string& where, CacheStats* cache);

// A segment's responses (its prefill windows' first when asked for, then one per decode depth, ascending) → its
// EngineSequence over t_0 … t_D, checked against what was sent and row by row (check_row). Any malformed
// response is a kc::Error naming it, never another exception (a checkpoint is read through here too).
EngineSequence segment_sequence(const RecordServerOptions& o, const SegmentPlan& p,
                                const std::vector<std::string>& lines, const std::string& where,
                                CacheStats* cache) {
  try {
    return segment_rows(o, p, lines, where, cache);
  } catch (const json::exception& e) {
    throw_input_error(where, "(response)", "a response of the documented shape", e.what());
  }
}

EngineSequence segment_rows(const RecordServerOptions& o, const SegmentPlan& p, const std::vector<std::string>& lines,
                            const std::string& where, CacheStats* cache) {
  const std::vector<PrefillWindow> windows = prefill_windows(o, p);
  std::size_t want = windows.size();
  for (std::int64_t d = 1; d <= p.depth(); ++d) want += is_decode(o.phase, p, d);
  if (lines.size() != want)
    throw_input_error(where, "responses", fmt::format("{} responses", want), std::to_string(lines.size()));
  std::vector<EngineSequence> pre;  // one per window; depth d's row is row d − first_token of its window's
  std::size_t at = 0;
  for (const PrefillWindow& w : windows) {
    const std::string& text = lines[at++];
    const std::string wp = windows.size() > 1 ? fmt::format("{} (prefill depths {}…{})", where, w.a, w.b)
                                              : where + " (prefill)";
    if (o.api == "sglang") {
      pre.push_back(read_sglang_prefill(text, p, w, wp));
      continue;
    }
    json doc = parse_json(text, wp);
    check_echo(one_choice(doc, wp), p.tokens, wp);
    EngineDump d = parse_vllm_logprobs(
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), wp);
    if (d.sequences.size() != 1) throw_input_error(wp, "choices", "one choice", std::to_string(d.sequences.size()));
    pre.push_back(std::move(d.sequences[0]));
  }
  EngineSequence seq;
  seq.where = where;
  seq.push_row(p.tokens[0], false, {}, 0.0f);
  std::vector<std::pair<std::int32_t, float>> entries;
  for (std::int64_t d = 1; d <= p.depth(); ++d) {
    if (is_decode(o.phase, p, d)) {
      const std::string w = fmt::format("{} (decode depth {})", where, d);
      DecodeRow r = o.api == "sglang" ? read_sglang_decode(lines[at++], p, d, w) : read_decode(lines[at++], p, d, w);
      if (cache) {
        cache->decode_requests += 1;
        cache->prompt_tokens += r.prompt_tokens;
        if (r.cached_tokens < 0)
          cache->unreported += 1;
        else
          cache->cached_tokens += r.cached_tokens;
      }
      check_row(r.entries, p, d, w);
      seq.push_row(p.tokens[d], true, r.entries, r.bound);
    } else {
      std::size_t wi = 0;
      while (wi + 1 < windows.size() && d > windows[wi].b) ++wi;
      const EngineSequence& q = pre.at(wi);
      const auto r = static_cast<std::size_t>(d - q.first_token);
      entries.clear();
      for (auto j = q.row_begin[r]; j < q.row_begin[r + 1]; ++j) entries.push_back({q.ids[j], q.log_probs[j]});
      check_row(entries, p, d, where + " (prefill)");
      seq.push_row(p.tokens[d], q.has_row[r], entries, q.bound[r]);
    }
  }
  return seq;
}

// ---- Checkpoints: OUT.partial/seg-NNNNN.safetensors (record_model.h), the raw responses ------------------
// Sealed like every checkpoint; tensors "responses" (U8: the responses' bytes one after another) and
// "response_ends" (I64: where each ends). On resume they are read again through segment_sequence, so a
// checkpoint is trusted no more than the server was.

std::vector<NamedTensor> responses_tensors(const std::vector<std::string>& lines) {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint8_t> ends(lines.size() * sizeof(std::int64_t));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    bytes.insert(bytes.end(), lines[i].begin(), lines[i].end());
    const auto e = static_cast<std::int64_t>(bytes.size());
    std::memcpy(ends.data() + i * sizeof e, &e, sizeof e);
  }
  const auto n_bytes = static_cast<std::int64_t>(bytes.size()), n = static_cast<std::int64_t>(lines.size());
  return {{"responses", make_tensor(DType::uint8, {n_bytes}, std::move(bytes), "responses")},
          {"response_ends", make_tensor(DType::int64, {n}, std::move(ends), "response_ends")}};
}

// ---- Progress -----------------------------------------------------------------------------------------

class Progress {
 public:
  Progress(std::int64_t total) : total_(total), t0_(Clock::now()), tty_(isatty(2)) {}
  void add(std::int64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    done_ += n;
    auto now = Clock::now();
    if (done_ < total_ && now - last_ < std::chrono::seconds(tty_ ? 1 : 10)) return;
    last_ = now;
    double s = std::chrono::duration<double>(now - t0_).count();
    double rate = s > 0 ? done_ / s : 0;
    double eta = rate > 0 ? (total_ - done_) / rate : 0;
    std::fprintf(stderr, "%srecord: %lld/%lld positions (%.0f%%), %.1f positions/s, ETA %.0f s%s",
                 tty_ ? "\r" : "", static_cast<long long>(done_), static_cast<long long>(total_),
                 total_ ? 100.0 * done_ / total_ : 100.0, rate, eta, tty_ && done_ < total_ ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  std::int64_t total_, done_ = 0;
  Clock::time_point t0_, last_{};
  bool tty_;
  std::mutex mu_;
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string served_model_of(Http& http, const RecordServerOptions& o) {
  if (!o.served_model.empty()) return o.served_model;
  const std::string url = o.url + "/v1/models";
  json doc = parse_json(request(http, url, nullptr, o), url);
  if (!doc.contains("data") || !doc["data"].is_array() || doc["data"].empty() || !doc["data"][0].is_object() ||
      !doc["data"][0].contains("id") || !doc["data"][0]["id"].is_string())
    throw_input_error(url, "data[0].id", "the served model's name", excerpt(doc.dump()));
  return doc["data"][0]["id"].get<std::string>();
}

std::int64_t stop_after() {
  const char* s = std::getenv("KC_RECORD_STOP_AFTER");
  return s && *s ? std::atoll(s) : -1;
}

// One recording into o.out; repetition r of n (n > 1: written into the file's metadata).
void record_once(const RecordServerOptions& o, int r, int n);

}  // namespace

std::vector<std::string> checkpoint_responses(const SafetensorsFile& f) {
  const std::vector<std::string> want = {"response_ends", "responses"};
  std::vector<std::string> names = f.names();
  std::sort(names.begin(), names.end());
  if (names != want)
    throw_input_error(f.path(), "tensors", "responses and response_ends (a record --server checkpoint)",
                      fmt::format("{} tensor(s)", names.size()));
  const Tensor bytes = f.tensor("responses"), ends = f.tensor("response_ends");
  if (bytes.dtype != DType::uint8 || bytes.shape.size() != 1)
    throw_input_error(f.path(), "tensor responses", "a U8 vector", fmt::format("{} {}", dtype_name(bytes.dtype),
                                                                              bytes.shape_str()));
  if (ends.dtype != DType::int64 || ends.shape.size() != 1)
    throw_input_error(f.path(), "tensor response_ends", "an I64 vector",
                      fmt::format("{} {}", dtype_name(ends.dtype), ends.shape_str()));
  const std::size_t n = ends.numel(), total = bytes.numel();
  std::vector<std::string> out;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t e = 0;
    std::memcpy(&e, ends.bytes.data() + i * sizeof e, sizeof e);
    if (e < at || e > static_cast<std::int64_t>(total) || (i + 1 == n && e != static_cast<std::int64_t>(total)))
      throw_input_error(f.path(), fmt::format("response_ends[{}]", i),
                        fmt::format("an offset in [{}, {}], the last one {}", at, total, total), std::to_string(e));
    out.emplace_back(reinterpret_cast<const char*>(bytes.bytes.data()) + at, static_cast<std::size_t>(e - at));
    at = e;
  }
  if (n == 0 && total != 0)
    throw_input_error(f.path(), "response_ends", fmt::format("the ends of the {} bytes of responses", total), "none");
  return out;
}

void read_segment_responses(const std::string& api, const std::string& phase, std::span<const std::int32_t> tokens,
                            std::int64_t n_prefill, std::int64_t vocab, const std::vector<std::string>& responses,
                            int prefill_window) {
  RecordServerOptions o;
  o.api = api, o.phase = phase, o.url = "fuzz";
  if (api == "sglang") o.prefill_window = prefill_window;
  SegmentPlan p{0, {tokens.begin(), tokens.end()}, n_prefill, {}, 0, 0, vocab};
  if (p.depth() < 1 || n_prefill < 0 || n_prefill > p.depth()) return;
  CacheStats cache;
  (void)segment_sequence(o, p, responses, "fuzz segment 0", &cache);
}

std::string repetition_path(const std::string& out, int r, int n) {
  if (n <= 1) return out;
  const fs::path p(out);
  const std::string name = p.filename().string();
  const std::size_t dot = name.rfind('.');
  const std::string stem = dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  const std::string ext = dot == std::string::npos || dot == 0 ? "" : name.substr(dot);
  return (p.parent_path() / fmt::format("{}.{}{}", stem, r, ext)).string();
}

void record_with_server(const RecordServerOptions& o) {
  if (o.api != "vllm" && o.api != "sglang")
    throw_input_error("--api", "api", "vllm or sglang (llamacpp: not supported yet)", o.api);
  if (o.repeat < 1) throw_input_error("--repeat", "N", "≥ 1", std::to_string(o.repeat));
  if (o.repeat > 1 && o.golden.empty())
    fail("--repeat: expected candidate mode (--golden GOLDEN; repetitions are the engine's noise runs), got "
         "golden mode (--corpus)");
  for (int r = 1; r <= o.repeat; ++r) check_output_path(repetition_path(o.out, r, o.repeat));
  for (int r = 1; r <= o.repeat; ++r) {
    RecordServerOptions one = o;
    one.out = repetition_path(o.out, r, o.repeat);
    if (o.repeat > 1) print_safe(stdout, fmt::format("repetition {} of {} → {}\n", r, o.repeat, one.out));
    std::fflush(stdout);
    record_once(one, r, o.repeat);
  }
}

namespace {

void record_once(const RecordServerOptions& o, int rep, int n_rep) {
  if (o.phase != "prefill" && o.phase != "decode" && o.phase != "both")
    throw_input_error("--phase", "phase", "prefill, decode or both", o.phase);
  if (o.top_logprobs < 1) throw_input_error("--top-logprobs", "K'", "≥ 1", std::to_string(o.top_logprobs));
  if (o.concurrency < 1) throw_input_error("--concurrency", "N", "≥ 1", std::to_string(o.concurrency));
  if (o.timeout_s <= 0) throw_input_error("--timeout", "seconds", "> 0", fmt::format("{}", o.timeout_s));
  if (o.retries < 0) throw_input_error("--retries", "N", "≥ 0", std::to_string(o.retries));
  if (o.prefill_window != -1 && o.api != "sglang")
    throw_input_error("--prefill-window", "W",
                      "only with --api sglang (vLLM's prompt log-probs list each position's own top-K': one "
                      "request per segment)",
                      std::to_string(o.prefill_window));
  if (o.prefill_window < -1 || o.prefill_window > (1 << 20))
    throw_input_error("--prefill-window", "W", "0 (the whole segment at once) … 1048576",
                      std::to_string(o.prefill_window));
  if (o.max_response_mb < 1 || o.max_response_mb > (1 << 20))
    throw_input_error("--max-response-mb", "MiB", "1 … 1048576", std::to_string(o.max_response_mb));
  const bool golden_mode = o.golden.empty();
  if (golden_mode == o.corpus.empty())
    fail("--server: expected one of --corpus CORPUS (golden) or --golden GOLDEN (candidate), got {}",
         golden_mode ? "both" : "neither");
  if (golden_mode && o.k > o.top_logprobs)
    fail("-k: expected at most --top-logprobs ({}): the engine reports only its top-K', got {}", o.top_logprobs,
         o.k);
  check_output_path(o.out);
  const auto t0 = Clock::now();
  const double cpu0 = cpu_seconds();

  // The segments to send.
  std::optional<Golden> golden;
  std::optional<Corpus> corpus;
  std::vector<SegmentPlan> plans;
  std::string data_id;
  if (golden_mode) {
    corpus = read_corpus(o.corpus);
    data_id = corpus->identity();
    std::int64_t start = 0;
    for (std::size_t i = 0; i < corpus->segments.size(); ++i) {
      const CorpusSegment& s = corpus->segments[i];
      auto w = corpus->window(s);
      plans.push_back(
          {static_cast<std::int32_t>(i), {w.begin(), w.end()}, s.depth - s.decode_last, {}, 0, start, corpus->vocab});
      start += s.depth;
    }
  } else {
    golden = read_golden(o.golden);
    data_id = golden->meta.checksum;
    std::vector<GoldenWindow> ws = golden_windows(*golden);
    const int k = golden->meta.k;
    for (std::size_t i = 0; i < ws.size(); ++i) {
      SegmentPlan p{static_cast<std::int32_t>(i), std::move(ws[i].tokens), ws[i].n_prefill, {}, 0, ws[i].start,
                    golden->meta.vocab};
      if (o.api == "sglang") {
        p.k = k;
        auto b = golden->a.top_ids.begin() + ws[i].start * k;
        p.ref_ids.assign(b, b + ws[i].depth * k);
      }
      plans.push_back(std::move(p));
    }
  }
  std::int64_t total = 0;
  for (auto& p : plans) total += p.depth();

  curl_global_init(CURL_GLOBAL_DEFAULT);
  Http http0;
  const std::string model = served_model_of(http0, o);
  // Everything that changes what the file holds: which server and model answered, through which API, for
  // which golden or corpus, what was asked (K', phase, k) and the label (variant, model id). Checkpoints
  // of any other run are discarded; a --repeat run is kept only when its file carries the same key.
  const std::string key = json{{"mode", golden_mode ? "golden" : "candidate"},
                               {"server", o.url},
                               {"api", o.api},
                               {"model", model},
                               {"data", data_id},
                               {"top_logprobs", o.top_logprobs},
                               {"phase", o.phase},
                               {"prefill_window", sglang_prefill_window(o)},
                               {"k", golden_mode ? o.k : golden->meta.k},
                               {"variant", o.variant},
                               {"model_id", o.model_id}}
                              .dump();
  // --repeat after a failure: a repetition already written by this same recording (same golden, engine,
  // model, phase, K', variant) is kept, so rerunning the command resumes instead of re-recording it.
  if (n_rep > 1 && !golden_mode && fs::exists(o.out)) {
    std::optional<Candidate> done;
    try {
      done = read_candidate(o.out);
    } catch (const Error&) {
    }  // unreadable or foreign: recorded again (the write is atomic)
    forget_input(o.out);  // read only to decide whether to redo it: replacing it is not clobbering an input
    auto has = [&](const char* f, const std::string& v) {
      auto it = done->meta.extra.find(f);
      return it != done->meta.extra.end() && it->second == v;
    };
    if (done && done->meta.golden_checksum == golden->meta.checksum && done->meta.made_by.variant == o.variant &&
        has("server_record", key) && has("repetition", std::to_string(rep)) &&
        has("repetitions", std::to_string(n_rep))) {
      print_safe(stdout, fmt::format("  {}: already recorded by this command (repetition {} of {}); kept\n", o.out,
                                     rep, n_rep));
      return;
    }
  }
  Checkpoints ckpt(o.out, key, "requested again");
  std::vector<std::optional<EngineSequence>> seqs(plans.size());
  CacheStats cache;
  std::mutex mu;
  Progress progress(total);
  std::vector<std::int32_t> todo;
  for (auto& p : plans) {
    const std::string where = fmt::format("{} segment {}", o.url, p.index);
    if (auto f = ckpt.open(p.index)) {
      try {
        CacheStats c;
        seqs[p.index] = segment_sequence(o, p, checkpoint_responses(*f), where, &c);
        cache.add(c);
        progress.add(p.depth());
        continue;
      } catch (const Error& e) {
        ckpt.discard(p.index, e.what());
      }
    }
    todo.push_back(p.index);
  }

  // Workers: one segment at a time each (its prefill, then its decode steps over the cached prefix).
  const std::int64_t limit = stop_after();
  std::atomic<std::size_t> next{0};
  std::atomic<std::int64_t> fetched{0};
  std::atomic<bool> stop{false};
  std::string first_error;
  auto work = [&] {
    Http http;
    const std::string url = o.url + (o.api == "sglang" ? "/generate" : "/v1/completions");
    while (!stop.load()) {
      std::size_t t = next.fetch_add(1);
      if (t >= todo.size()) return;
      const SegmentPlan& p = plans[todo[t]];
      try {
        if (limit >= 0 && fetched.fetch_add(1) >= limit) {
          stop = true;
          std::lock_guard<std::mutex> g(mu);
          if (first_error.empty())
            first_error = fmt::format(
                "interrupted after {} segment(s) (KC_RECORD_STOP_AFTER); rerun the same command to resume from "
                "{}.partial/",
                limit, o.out);
          return;
        }
        std::vector<std::string> lines;
        const bool sglang = o.api == "sglang";
        for (const PrefillWindow& w : prefill_windows(o, p)) {
          std::string body = sglang ? sglang_prefill_body(o, p, w) : prefill_body(o, model, p);
          lines.push_back(request(http, url, &body, o, &stop));
        }
        for (std::int64_t d = 1; d <= p.depth(); ++d)
          if (is_decode(o.phase, p, d)) {
            std::string body = sglang ? sglang_decode_body(o, p, d) : decode_body(o, model, p, d);
            lines.push_back(request(http, url, &body, o, &stop));
          }
        CacheStats c;
        EngineSequence seq = segment_sequence(o, p, lines, fmt::format("{} segment {}", o.url, p.index), &c);
        ckpt.write(p.index, responses_tensors(lines));
        {
          std::lock_guard<std::mutex> g(mu);
          seqs[p.index] = std::move(seq);
          cache.add(c);
        }
        progress.add(p.depth());
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> g(mu);
        if (first_error.empty() && !stop.load()) first_error = e.what();
        stop = true;
        return;
      }
    }
  };
  const std::size_t n_threads = std::min<std::size_t>(o.concurrency, todo.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n_threads; ++i) threads.emplace_back(work);
  for (auto& th : threads) th.join();
  if (!first_error.empty()) throw Error(first_error + fmt::format(" (finished segments are kept in {}.partial/; "
                                                                  "rerun the same command to resume)",
                                                                  o.out));

  EngineDump dump;
  dump.engine = o.api;
  dump.path = o.url;
  for (auto& s : seqs) dump.sequences.push_back(std::move(*s));
  const Provenance made_by{o.api, o.variant, o.command_line};
  if (golden_mode) {
    // The engine's top-K' rows → top-k golden rows; the tail mass is 1 − Σ top-k (what a top-K' engine gives).
    const int k = o.k;
    std::vector<std::int32_t> ids;
    std::vector<float> lps, other, tok_lp;
    std::vector<std::uint8_t> flags;
    std::vector<std::pair<float, std::int32_t>> row;
    for (std::size_t s = 0; s < plans.size(); ++s) {
      const EngineSequence& q = dump.sequences[s];
      for (std::int64_t d = 1; d <= plans[s].depth(); ++d) {
        row.clear();
        float tlp = std::numeric_limits<float>::quiet_NaN();
        for (auto j = q.row_begin[d]; j < q.row_begin[d + 1]; ++j) {
          const float v = q.log_probs[j];
          if (!std::isfinite(v))
            throw_input_error(fmt::format("{} segment {}", o.url, s), fmt::format("depth {}", d),
                              "finite log-probs (a golden's reference rows must be clean)", fmt::format("{}", v));
          row.push_back({v, q.ids[j]});
          if (q.ids[j] == q.tokens[d]) tlp = v;
        }
        if (static_cast<int>(row.size()) < k)
          throw_input_error(fmt::format("{} segment {}", o.url, s), fmt::format("depth {}", d),
                            fmt::format("at least k = {} listed ids", k), std::to_string(row.size()));
        std::partial_sort(row.begin(), row.begin() + k, row.end(), [](auto& a, auto& b) {
          return a.first > b.first || (a.first == b.first && a.second < b.second);
        });
        double mass = 0;
        for (int j = 0; j < k; ++j) ids.push_back(row[j].second), lps.push_back(row[j].first),
                                    mass += std::exp(static_cast<double>(row[j].first));
        other.push_back(static_cast<float>(std::log(std::max(1.0 - mass, 1e-30))));
        tok_lp.push_back(tlp);
        flags.push_back(0);
      }
    }
    TopkGoldenRows rows{k, ids, lps, other, tok_lp, flags};
    const std::string model_id = o.model_id.empty() ? o.api + ":" + model : o.model_id;
    std::string sum = write_golden_from_topk(o.out, *corpus, rows, corpus->vocab, model_id, made_by);
    print_safe(stdout, fmt::format("wrote golden {}: {} positions from {} ({}, phase {}), k = {} of K' = {}, "
                                   "checksum {}\n",
                                   o.out, total, o.url, model, o.phase, k, o.top_logprobs, sum));
  } else {
    ImportStats st;
    CandidateBuffers buf = candidate_from_engine(*golden, dump, &st);
    CandidateMeta meta = candidate_meta_for(*golden, made_by);
    for (auto& [k, v] : o.extra) meta.extra[k] = v;
    meta.extra["server_record"] = key;  // what was asked of which engine (a --repeat rerun keeps a match)
    if (n_rep > 1) {  // which noise run this is (kerncheck test's provenance; docs/engines.md)
      meta.extra["repetition"] = std::to_string(rep);
      meta.extra["repetitions"] = std::to_string(n_rep);
    }
    write_candidate(o.out, meta, buf.view());
    print_safe(stdout, fmt::format("wrote {}: {} positions from {} ({}, phase {}), golden top-k ids covered {:.2f}% "
                                   "({} of {}), fully covered positions {:.2f}%\n",
                                   o.out, st.positions, o.url, model, o.phase, 100 * st.coverage(), st.ids_covered,
                                   st.ids, st.positions ? 100.0 * st.positions_fully_covered / st.positions : 100.0));
    if (st.coverage() < 1)
      std::printf("  partial coverage: kerncheck test reports KL as [lower, upper] bounds (%s)\n",
                  o.api == "sglang" ? "SGLang did not return every id asked for in token_ids_logprob"
                                    : "raise vLLM --max-logprobs and --top-logprobs to tighten them");
  }
  ckpt.finish();
  if (cache.decode_requests) {
    if (cache.unreported == cache.decode_requests)
      std::printf("  decode steps: %lld requests; cached prompt tokens not reported (start vLLM with "
                  "--enable-prompt-tokens-details to see them)\n",
                  static_cast<long long>(cache.decode_requests));
    else
      std::printf("  decode steps: %lld requests, cached prompt tokens %lld of %lld (%.1f%%)\n",
                  static_cast<long long>(cache.decode_requests), static_cast<long long>(cache.cached_tokens),
                  static_cast<long long>(cache.prompt_tokens),
                  cache.prompt_tokens ? 100.0 * cache.cached_tokens / cache.prompt_tokens : 0.0);
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  std::printf("  time %.1f s; kerncheck's own CPU time %.2f s (%.1f%% of the wall time)\n", wall, cpu,
              wall > 0 ? 100 * cpu / wall : 0.0);
}

}  // namespace

}  // namespace kc
