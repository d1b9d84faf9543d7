#include "golden/import_json.h"

#include <charconv>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"

namespace kc::import_detail {

namespace {

// SAX handler that builds the envelope and streams the named arrays.
class StreamBuilder {
 public:
  StreamBuilder(const std::string& file, const std::set<std::string>& streamed_keys, const ElementFn& fn,
                std::string prefix)
      : file_(file), streamed_keys_(streamed_keys), fn_(fn), prefix_(std::move(prefix)) {}

  json take_root() { return std::move(root_); }

  bool null() { return finish(json(nullptr)); }
  bool boolean(bool v) { return finish(json(v)); }
  bool number_integer(json::number_integer_t v) { return finish(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return finish(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return finish(json(v)); }
  bool string(json::string_t& v) { return finish(json(std::move(v))); }
  bool binary(json::binary_t&) { kc::throw_input_error(file_, here(), "JSON values", "a binary value"); }

  bool start_object(std::size_t) { return open(json::object(), false); }
  bool key(json::string_t& k) {
    Frame& f = stack_.back();
    if (f.value.contains(k))
      kc::throw_input_error(file_, path_of(f), "each key once", fmt::format("key \"{}\" twice", k));
    f.key = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) {
    bool streamed =
        !stack_.empty() && stack_.back().value.is_object() && streamed_keys_.count(stack_.back().key);
    return open(json::array(), streamed);
  }
  bool end_array() { return close(); }

  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) {
    std::string what = ex.what();
    // nlohmann's text: "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
    if (auto p = what.find("syntax error"); p != std::string::npos) what = what.substr(p);
    kc::throw_input_error(file_,
                          fmt::format("byte {} (inside {})", position == 0 ? 0 : position - 1,
                                      here().empty() ? "the top level" : here()),
                          "valid JSON", what);
  }

 private:
  struct Frame {
    json value;
    std::string key;        // pending key (objects)
    std::size_t count = 0;  // elements seen (arrays)
    bool streamed = false;
    std::string path;  // of this container
  };

  std::string path_of(const Frame& f) const { return f.path.empty() ? "(top level)" : f.path; }
  std::string here() const { return stack_.empty() ? prefix_ : stack_.back().path; }

  // The path a new child of the top frame gets.
  std::string child_path() const {
    if (stack_.empty()) return prefix_;
    const Frame& f = stack_.back();
    return f.value.is_object() ? path_key(f.path, f.key) : path_index(f.path, f.count);
  }

  bool open(json v, bool streamed) {
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth)
      kc::throw_input_error(file_, here(),
                            fmt::format("at most {} levels of nesting (an engine log-prob dump)", kMaxJsonDepth),
                            "deeper nesting");
    Frame f;
    f.path = child_path();
    f.value = std::move(v);
    f.streamed = streamed;
    stack_.push_back(std::move(f));
    return true;
  }

  bool close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return finish(std::move(f.value));
  }

  bool finish(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = stack_.back();
    if (f.value.is_object()) {
      f.value[f.key] = std::move(v);
    } else if (f.streamed) {
      fn_(f.path, f.count, v);
    } else {
      f.value.push_back(std::move(v));
    }
    ++f.count;
    return true;
  }

  const std::string& file_;
  const std::set<std::string>& streamed_keys_;
  const ElementFn& fn_;
  std::string prefix_;
  std::vector<Frame> stack_;
  json root_;
};

}  // namespace

json parse_json_stream(std::span<const std::uint8_t> bytes, const std::string& file,
                       const std::set<std::string>& streamed_keys, const ElementFn& on_element,
                       const std::string& path_prefix) {
  StreamBuilder b(file, streamed_keys, on_element, path_prefix);
  const char* first = reinterpret_cast<const char*>(bytes.data());
  json::sax_parse(first, first + bytes.size(), &b);
  return b.take_root();
}

void for_each_json_document(const std::string& path, const std::set<std::string>& streamed_keys,
                            const ElementFn& on_element, const DocumentFn& on_document) {
  auto file = MappedFile::open(path);
  for_each_json_document(file->bytes(), path, streamed_keys, on_element, on_document);
}

void for_each_json_document(std::span<const std::uint8_t> bytes, const std::string& path,
                            const std::set<std::string>& streamed_keys, const ElementFn& on_element,
                            const DocumentFn& on_document) {
  auto ends_with = [&](std::string_view s) { return path.size() >= s.size() && path.ends_with(s); };
  if (!ends_with(".jsonl") && !ends_with(".ndjson")) {
    json doc = parse_json_stream(bytes, path, streamed_keys, on_element);
    on_document(doc, "");
    return;
  }
  std::size_t line = 0, begin = 0, n_docs = 0;
  while (begin <= bytes.size()) {
    std::size_t end = begin;
    while (end < bytes.size() && bytes[end] != '\n') ++end;
    auto piece = bytes.subspan(begin, end - begin);
    bool blank = true;
    for (auto c : piece) blank = blank && (c == ' ' || c == '\t' || c == '\r');
    if (!blank) {
      std::string prefix = fmt::format("[{}]", line);
      json doc = parse_json_stream(piece, fmt::format("{} line {}", path, line + 1), streamed_keys,
                                   on_element, prefix);
      on_document(doc, prefix);
      ++n_docs;
    }
    ++line;
    begin = end + 1;
  }
  if (n_docs == 0) throw_input_error(path, "", "at least one JSON document (one per line)", "an empty file");
}

std::string json_kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return fmt::format("integer {}", v.dump());
    case json::value_t::number_float:
      return fmt::format("number {}", v.dump());
    default:
      return "a non-JSON value";
  }
}

std::string path_key(std::string_view base, std::string_view key) {
  return base.empty() ? std::string(key) : fmt::format("{}.{}", base, key);
}
std::string path_index(std::string_view base, std::size_t index) {
  return fmt::format("{}[{}]", base, index);
}

void throw_json_type(const std::string& file, const std::string& path, std::string_view expected,
                     const json& got) {
  throw_input_error(file, path.empty() ? "(top level)" : path, expected, json_kind(got));
}

double json_number(const json& v, const std::string& file, const std::string& path) {
  if (!v.is_number()) throw_json_type(file, path, "a number", v);
  return v.get<double>();
}

std::int32_t json_token_id(const json& v, const std::string& file, const std::string& path) {
  if (v.is_number_unsigned() && v.get<std::uint64_t>() <= 0x7fffffffu)
    return static_cast<std::int32_t>(v.get<std::uint64_t>());
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= 0x7fffffff)
    return static_cast<std::int32_t>(v.get<std::int64_t>());
  throw_json_type(file, path, "a token id (integer 0 ≤ id < 2^31)", v);
}

std::int32_t token_id_from_key(std::string_view key, const std::string& file, const std::string& path) {
  std::uint32_t id = 0;
  bool digits = !key.empty() && key.size() <= 10;
  for (char c : key) digits = digits && c >= '0' && c <= '9';
  if (digits) {
    auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    digits = ec == std::errc() && p == key.data() + key.size() && id <= 0x7fffffffu;
  }
  if (!digits)
    throw_input_error(file, path, "a token id as key (decimal digits, < 2^31)", fmt::format("\"{}\"", key));
  return static_cast<std::int32_t>(id);
}

}  // namespace kc::import_detail
