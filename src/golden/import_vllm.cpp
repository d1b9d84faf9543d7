// vLLM prompt_logprobs → EngineDump.
//
// Accepted documents (docs/importers.md): an OpenAI-compatible completions response
// {"choices": [{"prompt_logprobs": [...], "prompt_token_ids": [...]}, …]}; a chat-completions or
// /generate response with top-level "prompt_logprobs" / "prompt_token_ids"; one serialised RequestOutput
// {"prompt_token_ids": [...], "prompt_logprobs": [...]} or a JSON list of them; or JSON Lines of any of
// these. prompt_logprobs[i] is null or {"TOKEN_ID": {"logprob": x, "rank": r, "decoded_token": s}} and
// holds the engine's top-K' for the distribution that predicted prompt token i, plus token i itself
// (at its true rank, which may exceed K').
#include <cmath>
#include <limits>
#include <map>
#include <unordered_set>

#include "core/error.h"
#include "core/mapped_file.h"
#include "golden/engine_logprobs.h"
#include "golden/import_json.h"

namespace kc {

namespace {

using import_detail::json;

// Rows as read, before the prompt ids (which may come later in the document) are known.
struct RawRows {
  std::vector<std::uint8_t> present;
  std::vector<std::uint64_t> begin{0};
  std::vector<std::int32_t> ids, ranks;  // rank −1: not given
  std::vector<float> lps;
};

void read_row(const std::string& file, const std::string& path, json& el, RawRows& rows) {
  if (el.is_null()) {
    rows.present.push_back(0);
    rows.begin.push_back(rows.ids.size());
    return;
  }
  if (!el.is_object()) import_detail::throw_json_type(file, path, "object or null", el);
  for (auto& [key, v] : el.items()) {
    std::string p = import_detail::path_key(path, key);
    std::int32_t id = import_detail::token_id_from_key(key, file, p);
    if (!v.is_object())
      import_detail::throw_json_type(file, p, "an object {logprob, rank, decoded_token}", v);
    auto lp_it = v.find("logprob");
    if (lp_it == v.end()) throw_input_error(file, p, "a \"logprob\" field", "none");
    // A null log-prob is how pydantic writes a non-finite float: keep it as NaN (flagged by the judge).
    float lp = lp_it->is_null()
                   ? std::numeric_limits<float>::quiet_NaN()
                   : static_cast<float>(import_detail::json_number(*lp_it, file, p + ".logprob"));
    if (lp > 0) throw_input_error(file, p + ".logprob", "a log-prob ≤ 0", fmt::format("{}", lp));
    std::int32_t rank = -1;
    if (auto r = v.find("rank"); r != v.end() && !r->is_null()) {
      rank = import_detail::json_token_id(*r, file, p + ".rank");
      if (rank < 1) throw_input_error(file, p + ".rank", "a rank ≥ 1", std::to_string(rank));
    }
    // One entry per id ("650" and "0650" name the same token): a row that lists an id twice is not a
    // distribution's, whichever value would be kept.
    for (auto j = rows.begin.back(); j < rows.ids.size(); ++j)
      if (rows.ids[j] == id)
        throw_input_error(file, p, fmt::format("token id {} listed once in the row", id), "listed twice");
    rows.ids.push_back(id);
    rows.ranks.push_back(rank);
    rows.lps.push_back(lp);
  }
  rows.present.push_back(1);
  rows.begin.push_back(rows.ids.size());
}

// Every id the engine did not list has rank > R, where ranks 1..R all appear in the row; so its log-prob
// is at most that of the rank-R entry. Without ranks: the smallest listed log-prob after leaving out the
// prompt token (which vLLM adds even when it is outside the top-K'); when that token is unknown, the
// second smallest (valid whether or not the prompt token is the extra entry).
float row_bound(const RawRows& rows, std::size_t i, std::int32_t prompt_token) {
  auto b = rows.begin[i], e = rows.begin[i + 1];
  if (b == e) return 0.0f;
  bool any_rank = false;
  for (auto j = b; j < e; ++j) any_rank = any_rank || rows.ranks[j] > 0;
  float inf = std::numeric_limits<float>::infinity();
  if (any_rank) {
    std::vector<std::uint8_t> seen(e - b + 2, 0);
    for (auto j = b; j < e; ++j)
      if (rows.ranks[j] > 0 && static_cast<std::size_t>(rows.ranks[j]) <= e - b) seen[rows.ranks[j]] = 1;
    std::size_t r = 0;
    while (r + 1 < seen.size() && seen[r + 1]) ++r;
    if (r == 0) return 0.0f;  // rank 1 missing: nothing is known about unlisted ids
    float bound = inf;
    for (auto j = b; j < e; ++j)
      if (rows.ranks[j] > 0 && static_cast<std::size_t>(rows.ranks[j]) <= r)
        bound = std::min(bound, rows.lps[j]);
    return bound;
  }
  float lo = inf, lo2 = inf, lo_wo_prompt = inf;
  for (auto j = b; j < e; ++j) {
    float v = rows.lps[j];
    if (!(v == v)) continue;
    if (v < lo)
      lo2 = lo, lo = v;
    else if (v < lo2)
      lo2 = v;
    if (rows.ids[j] != prompt_token) lo_wo_prompt = std::min(lo_wo_prompt, v);
  }
  float bound = prompt_token >= 0 ? lo_wo_prompt : lo2;
  return bound == inf ? 0.0f : bound;
}

}  // namespace

EngineDump read_vllm_logprobs(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_vllm_logprobs(file->bytes(), path);
}

EngineDump parse_vllm_logprobs(std::span<const std::uint8_t> bytes, const std::string& path) {
  EngineDump dump;
  dump.engine = "vllm";
  dump.path = path;
  std::map<std::string, RawRows> raw;  // by array path
  auto on_element = [&](const std::string& array_path, std::size_t index, json& el) {
    read_row(path, import_detail::path_index(array_path, index), el, raw[array_path]);
  };
  // One request: an object with "prompt_logprobs" (and ideally "prompt_token_ids").
  auto take = [&](const json& obj, const std::string& where) {
    std::string lp_path = import_detail::path_key(where, "prompt_logprobs");
    const json& lp = obj.at("prompt_logprobs");
    if (lp.is_null())
      throw_input_error(path, lp_path, "a list (request prompt_logprobs=K in the sampling params)", "null");
    if (!lp.is_array()) import_detail::throw_json_type(path, lp_path, "a list of objects or nulls", lp);
    RawRows& rows = raw[lp_path];
    std::size_t n = rows.present.size();
    EngineSequence seq;
    seq.where = where.empty() ? "(top level)" : where;
    std::vector<std::int32_t> tokens(n, -1);
    auto ids_it = obj.find("prompt_token_ids");
    seq.tokens_known = ids_it != obj.end() && !ids_it->is_null();
    if (seq.tokens_known) {
      std::string ids_path = import_detail::path_key(where, "prompt_token_ids");
      if (!ids_it->is_array()) import_detail::throw_json_type(path, ids_path, "a list of token ids", *ids_it);
      if (ids_it->size() != n)
        throw_input_error(path, ids_path, fmt::format("{} ids (one per prompt_logprobs entry)", n),
                          fmt::format("{}", ids_it->size()));
      for (std::size_t i = 0; i < n; ++i)
        tokens[i] = import_detail::json_token_id((*ids_it)[i], path, import_detail::path_index(ids_path, i));
    }
    std::vector<std::pair<std::int32_t, float>> entries;
    std::unordered_set<std::int32_t> seen;
    for (std::size_t i = 0; i < n; ++i) {
      entries.clear();
      seen.clear();
      for (auto j = rows.begin[i]; j < rows.begin[i + 1]; ++j)
        if (seen.insert(rows.ids[j]).second) entries.push_back({rows.ids[j], rows.lps[j]});
      if (rows.present[i] && seq.tokens_known && !seen.count(tokens[i]))
        throw_input_error(path, import_detail::path_index(lp_path, i),
                          fmt::format("an entry for the prompt token {} (vLLM always lists it)", tokens[i]),
                          "none");
      seq.push_row(tokens[i], rows.present[i], entries, row_bound(rows, i, tokens[i]));
    }
    dump.sequences.push_back(std::move(seq));
  };
  auto is_request = [](const json& v) { return v.is_object() && v.contains("prompt_logprobs"); };
  auto on_document = [&](json& doc, const std::string& prefix) {
    if (doc.is_object() && doc.contains("choices")) {
      std::string cp = import_detail::path_key(prefix, "choices");
      const json& ch = doc["choices"];
      if (!ch.is_array()) import_detail::throw_json_type(path, cp, "a list of choices", ch);
      for (std::size_t i = 0; i < ch.size(); ++i) {
        std::string w = import_detail::path_index(cp, i);
        if (!ch[i].is_object()) import_detail::throw_json_type(path, w, "a choice object", ch[i]);
        if (is_request(ch[i])) take(ch[i], w);
      }
      if (is_request(doc)) take(doc, prefix);  // chat completions: prompt_logprobs beside "choices"
    } else if (is_request(doc)) {
      take(doc, prefix);
    } else if (doc.is_array()) {
      for (std::size_t i = 0; i < doc.size(); ++i) {
        std::string w = import_detail::path_index(prefix, i);
        if (!is_request(doc[i]))
          import_detail::throw_json_type(
              path, w, "an object with \"prompt_logprobs\" (a serialised RequestOutput)", doc[i]);
        take(doc[i], w);
      }
    } else {
      throw_input_error(
          path, prefix.empty() ? "(top level)" : prefix,
          "a vLLM response with \"choices\"/\"prompt_logprobs\" or a list of RequestOutput objects",
          import_detail::json_kind(doc) + (doc.is_object() ? " without those keys" : ""));
    }
  };
  import_detail::for_each_json_document(bytes, path, {"prompt_logprobs"}, on_element, on_document);
  if (dump.sequences.empty())
    throw_input_error(path, "prompt_logprobs", "at least one request with prompt_logprobs", "none");
  return dump;
}

}  // namespace kc
