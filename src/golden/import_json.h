// Streaming JSON for the engine importers (internal to src/golden/import_*.cpp and the fuzz targets).
//
// Engine dumps are one small envelope around a few huge arrays (vLLM `prompt_logprobs`: ~1.4 kB per
// position at K' = 20, so hundreds of MB). JsonStream builds the envelope as nlohmann::json and hands
// the elements of the named arrays to a callback one at a time, then drops them: memory is one element,
// not the document. Parsing is nlohmann's SAX parser over the memory-mapped bytes (non-recursive), so a
// deeply nested or truncated file ends in a kc::Error, never a crash.
//
// Every error names the file and the JSON path of the offending value, e.g.
//   "out.json: choices[0].prompt_logprobs[17]: expected object or null, got string".
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>

namespace kc::import_detail {

using nlohmann::json;

// Deepest nesting accepted: the engine formats need 6; anything far deeper is not one of them.
inline constexpr int kMaxJsonDepth = 64;

// Called for each element of a streamed array. `array_path` is the array's path
// ("choices[0].prompt_logprobs"), `index` the element's index in it. The element may be moved from.
using ElementFn = std::function<void(const std::string& array_path, std::size_t index, json& element)>;

// Parses one JSON document held in `bytes`. Arrays whose key is in `streamed_keys` (at any depth) are
// streamed through `on_element` and appear in the returned document as empty arrays. Throws kc::Error
// naming `file` on a syntax error (with the byte offset), on nesting deeper than kMaxJsonDepth, and on a
// key repeated in one object. `path_prefix` is prepended to every path (used for JSON Lines: "[3]").
json parse_json_stream(std::span<const std::uint8_t> bytes, const std::string& file,
                       const std::set<std::string>& streamed_keys, const ElementFn& on_element,
                       const std::string& path_prefix = "");

// The documents of a file: a JSON Lines file (name ends in .jsonl or .ndjson) gives one document per
// non-blank line, with paths prefixed "[LINE_INDEX]"; any other file is one document. `on_document`
// receives each envelope and its path prefix.
using DocumentFn = std::function<void(json& doc, const std::string& prefix)>;
void for_each_json_document(const std::string& path, const std::set<std::string>& streamed_keys,
                            const ElementFn& on_element, const DocumentFn& on_document);
// The same over bytes in memory; `name` decides JSON Lines (by its suffix) and appears in messages.
void for_each_json_document(std::span<const std::uint8_t> bytes, const std::string& name,
                            const std::set<std::string>& streamed_keys, const ElementFn& on_element,
                            const DocumentFn& on_document);

// "string", "number", "object", … of a value, for error messages.
std::string json_kind(const json& v);

// "a.b" / "a[3]" (a leading "." is dropped when `base` is empty).
std::string path_key(std::string_view base, std::string_view key);
std::string path_index(std::string_view base, std::size_t index);

// Typed accessors: on a wrong type they throw "FILE: PATH: expected WHAT, got KIND".
[[noreturn]] void throw_json_type(const std::string& file, const std::string& path, std::string_view expected,
                                  const json& got);
double json_number(const json& v, const std::string& file, const std::string& path);  // integer or float
std::int32_t json_token_id(const json& v, const std::string& file, const std::string& path);  // 0 ≤ id < 2^31
// A token id written as a JSON object key ("12345"): decimal digits only, no sign, < 2^31.
std::int32_t token_id_from_key(std::string_view key, const std::string& file, const std::string& path);

}  // namespace kc::import_detail
