// SGLang /generate (or Engine.generate) log-probs → EngineDump.
//
// Accepted documents (docs/importers.md): one response {"text": …, "meta_info": {…}} or a JSON list of
// them (a batched request), or JSON Lines of either. Request with "return_logprob": true,
// "logprob_start_len": 0 (or L), "top_logprobs_num": K' and optionally "token_ids_logprob": [ids].
// meta_info fields read:
//   input_token_logprobs[i]    = [logprob | null, token_id, text | null]  for prompt token L+i
//   input_top_logprobs[i]      = null | [[logprob, token_id, text], …]    top-K' predicting token L+i
//   input_token_ids_logprobs[i] = null | [[logprob, token_id, text], …]    the requested ids there
//   prompt_tokens              = prompt length (gives L = prompt_tokens − len(input_token_logprobs))
// Entry 0 is always null: SGLang pads it (scheduler: `input_token_logprobs_val = [None] + …`).
// SglangSide::output reads output_token_logprobs / output_top_logprobs / output_token_ids_logprobs instead
// (row i: the distribution the i-th generated token was drawn from; prompt_tokens is not used).
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "golden/engine_logprobs.h"
#include "golden/import_json.h"

namespace kc {

namespace {

using import_detail::json;

struct Entry {
  std::int32_t id;
  float lp;
};

// One streamed list: per element, its entries (or absent).
struct RawList {
  std::vector<std::uint8_t> present;
  std::vector<std::uint64_t> begin{0};
  std::vector<Entry> entries;
};

// [logprob | null, token_id, text | null]; a null log-prob gives NaN.
Entry read_triple(const std::string& file, const std::string& path, const json& t, bool allow_null_lp) {
  if (!t.is_array() || t.size() < 2 || t.size() > 3)
    import_detail::throw_json_type(file, path, "[logprob, token_id, text]", t);
  std::int32_t id = import_detail::json_token_id(t[1], file, path + "[1]");
  float lp;
  if (t[0].is_null()) {
    if (!allow_null_lp) import_detail::throw_json_type(file, path + "[0]", "a log-prob", t[0]);
    lp = std::numeric_limits<float>::quiet_NaN();
  } else {
    lp = static_cast<float>(import_detail::json_number(t[0], file, path + "[0]"));
    if (lp > 0) throw_input_error(file, path + "[0]", "a log-prob ≤ 0", fmt::format("{}", lp));
  }
  return {id, lp};
}

void read_list_element(const std::string& file, const std::string& path, bool token_list, const json& el,
                       RawList& list) {
  if (token_list) {
    // input_token_logprobs: one triple per prompt token; its log-prob is null at entry 0.
    list.entries.push_back(read_triple(file, path, el, true));
    list.present.push_back(1);
  } else if (el.is_null()) {
    list.present.push_back(0);
  } else {
    if (!el.is_array())
      import_detail::throw_json_type(file, path, "a list of [logprob, token_id, text] or null", el);
    for (std::size_t j = 0; j < el.size(); ++j) {
      const Entry e = read_triple(file, import_detail::path_index(path, j), el[j], false);
      for (auto i = list.begin.back(); i < list.entries.size(); ++i)  // a list names each id once
        if (list.entries[i].id == e.id)
          throw_input_error(file, import_detail::path_index(path, j) + "[1]",
                            fmt::format("token id {} listed once in the list", e.id), "listed twice");
      list.entries.push_back(e);
    }
    list.present.push_back(el.empty() ? 0 : 1);
  }
  list.begin.push_back(list.entries.size());
}

struct SideKeys {
  const char *token, *top, *ids;
};
SideKeys keys_of(SglangSide side) {
  if (side == SglangSide::output)
    return {"output_token_logprobs", "output_top_logprobs", "output_token_ids_logprobs"};
  return {"input_token_logprobs", "input_top_logprobs", "input_token_ids_logprobs"};
}

}  // namespace

EngineDump read_sglang_logprobs(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_sglang_logprobs(file->bytes(), path);
}

EngineDump parse_sglang_logprobs(std::span<const std::uint8_t> bytes, const std::string& path, SglangSide side) {
  const SideKeys keys = keys_of(side);
  const char* kTokenKey = keys.token;
  const char* kTopKey = keys.top;
  const char* kIdsKey = keys.ids;
  const bool input = side == SglangSide::input;
  EngineDump dump;
  dump.engine = "sglang";
  dump.path = path;
  std::map<std::string, RawList> raw;
  auto ends_with = [](const std::string& s, std::string_view t) {
    return s.size() >= t.size() && s.ends_with(t);
  };
  auto on_element = [&](const std::string& array_path, std::size_t index, json& el) {
    bool token_list = ends_with(array_path, std::string(".") + kTokenKey) || array_path == kTokenKey;
    read_list_element(path, import_detail::path_index(array_path, index), token_list, el, raw[array_path]);
  };
  auto take = [&](const json& response, const std::string& where) {
    std::string mp = import_detail::path_key(where, "meta_info");
    auto mi = response.find("meta_info");
    if (mi == response.end() || !mi->is_object())
      throw_input_error(path, mp, "an object (the /generate response's meta_info)",
                        mi == response.end() ? "none" : import_detail::json_kind(*mi));
    auto list_at = [&](const char* key, bool required) -> RawList* {
      std::string p = import_detail::path_key(mp, key);
      auto it = mi->find(key);
      if (it == mi->end() || it->is_null()) {
        if (required)
          throw_input_error(path, p,
                            input ? "a list (request with \"return_logprob\": true, \"logprob_start_len\" ≥ 0)"
                                  : "a list (request with \"return_logprob\": true, \"max_new_tokens\" ≥ 1)",
                            it == mi->end() ? "none" : "null");
        return nullptr;
      }
      if (!it->is_array()) import_detail::throw_json_type(path, p, "a list", *it);
      return &raw[p];
    };
    RawList* tok = list_at(kTokenKey, true);
    RawList* top = list_at(kTopKey, false);
    RawList* req = list_at(kIdsKey, false);
    std::size_t n = tok->present.size();
    for (auto [list, key] : {std::pair{top, kTopKey}, std::pair{req, kIdsKey}})
      if (list && list->present.size() != n)
        throw_input_error(path, import_detail::path_key(mp, key),
                          fmt::format("{} entries (one per input_token_logprobs entry)", n),
                          std::to_string(list->present.size()));
    EngineSequence seq;
    seq.where = where.empty() ? "(top level)" : where;
    if (auto pt = mi->find("prompt_tokens"); input && pt != mi->end() && !pt->is_null()) {
      std::int64_t prompt_tokens =
          import_detail::json_token_id(*pt, path, import_detail::path_key(mp, "prompt_tokens"));
      if (prompt_tokens < static_cast<std::int64_t>(n))
        throw_input_error(path, import_detail::path_key(mp, "prompt_tokens"),
                          fmt::format("at least {} (the length of input_token_logprobs)", n),
                          std::to_string(prompt_tokens));
      seq.first_token = prompt_tokens - static_cast<std::int64_t>(n);
    }
    std::vector<std::pair<std::int32_t, float>> entries;
    std::unordered_map<std::int32_t, float> seen;
    float inf = std::numeric_limits<float>::infinity();
    // An id in several lists of one row (the token, the top-K', the ids asked for) is listed once; the
    // lists must agree on its log-prob (they are read off one distribution).
    auto first = [&](std::size_t i, std::int32_t id, float lp, const char* key) {
      auto [it, fresh] = seen.emplace(id, lp);
      if (!fresh && !(it->second == lp || (std::isnan(it->second) && std::isnan(lp))))
        throw_input_error(path, import_detail::path_index(import_detail::path_key(mp, key), i),
                          fmt::format("one log-prob for token id {} in all lists of the row", id),
                          fmt::format("{} and {}", it->second, lp));
      return fresh;
    };
    for (std::size_t i = 0; i < n; ++i) {
      entries.clear();
      seen.clear();
      const Entry& t = tok->entries[i];
      bool token_lp = !std::isnan(t.lp);
      bool has_top = top && top->present[i];
      bool has_req = req && req->present[i];
      float bound = 0.0f;  // no top-K': unlisted ids are only known to have log p ≤ 0
      if (has_top) {
        bound = inf;
        for (auto j = top->begin[i]; j < top->begin[i + 1]; ++j) {
          const Entry& e = top->entries[j];
          if (first(i, e.id, e.lp, kTopKey)) entries.push_back({e.id, e.lp});
          if (!std::isnan(e.lp)) bound = std::min(bound, e.lp);
        }
        if (bound == inf) bound = 0.0f;
      }
      if (token_lp && first(i, t.id, t.lp, kTokenKey)) entries.push_back({t.id, t.lp});
      if (has_req)
        for (auto j = req->begin[i]; j < req->begin[i + 1]; ++j)
          if (first(i, req->entries[j].id, req->entries[j].lp, kIdsKey))
            entries.push_back({req->entries[j].id, req->entries[j].lp});
      seq.push_row(t.id, token_lp || has_top || has_req, entries, bound);
    }
    dump.sequences.push_back(std::move(seq));
  };
  auto on_document = [&](json& doc, const std::string& prefix) {
    if (doc.is_object()) {
      take(doc, prefix);
    } else if (doc.is_array()) {
      for (std::size_t i = 0; i < doc.size(); ++i) {
        std::string w = import_detail::path_index(prefix, i);
        if (!doc[i].is_object())
          import_detail::throw_json_type(path, w, "a /generate response object", doc[i]);
        take(doc[i], w);
      }
    } else {
      import_detail::throw_json_type(path, prefix, "a /generate response object or a list of them", doc);
    }
  };
  import_detail::for_each_json_document(bytes, path, {kTokenKey, kTopKey, kIdsKey}, on_element, on_document);
  if (dump.sequences.empty()) throw_input_error(path, "", "at least one /generate response", "none");
  return dump;
}

}  // namespace kc
