#include "golden/corpus.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/hash.h"
#include "io/safetensors.h"
#include "model/gguf.h"

namespace kc {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::int64_t Corpus::positions() const {
  std::int64_t n = 0;
  for (auto& s : segments) n += s.depth;
  return n;
}

void resolve_corpus_options(CorpusOptions& o) {
  // deep: two long windows (prose, code), so every depth from 1 to 8 192 is scored, in prefill but for a
  // short decoded tail: each depth bucket 64 … 4096+ holds ≥ 2 × 64 positions, at minutes per record (the
  // attention of 8 192 tokens costs as much as the weights), not the full preset's hours of decoding.
  struct Shape {
    const char* name;
    std::vector<std::int64_t> depths;
    std::int64_t segments, decode_last;
  };
  // quick: 24 segments, half of each decoded — the shape whose floor test detects a 1.25× increase of the
  // decode and deepest-depth KL means with an 8-run floor (EXPERIMENTS.md, "The zoo on 24 segments").
  static const Shape shapes[] = {{"quick", {256, 512}, 12, 128},
                                 {"full", {1024, 2048, 4096, 8192}, 4, 512},
                                 {"deep", {8192}, 2, 32}};
  const Shape* shape = nullptr;
  for (const Shape& s : shapes)
    if (o.preset == s.name) shape = &s;
  if (!shape) fail("--preset: expected quick, full or deep, got \"{}\"", o.preset);
  if (o.depths.empty()) o.depths = shape->depths;
  if (!o.segments_per_depth) o.segments_per_depth = shape->segments;
  // The preset's tail, but at most half the shallowest depth when the depths are given and decode_last is
  // not (depth 64 keeps 32 prefill positions instead of being refused).
  if (!o.decode_last)
    o.decode_last = std::min(shape->decode_last, *std::min_element(o.depths.begin(), o.depths.end()) / 2);
  for (auto d : o.depths)
    if (d < 2 || d > (1 << 20)) fail("--depths: expected depths in [2, 2^20], got {}", d);
  if (*o.segments_per_depth < 1 || *o.segments_per_depth > 4096)
    fail("--segments-per-depth: expected 1 … 4096, got {}", *o.segments_per_depth);
  if (*o.decode_last < 0) fail("--decode-last: expected ≥ 0, got {}", *o.decode_last);
  for (auto d : o.depths)
    if (*o.decode_last > d - 1)
      fail("--decode-last: expected at most depth − 1 = {} (one prefill position at least), got {}", d - 1,
           *o.decode_last);
}

Tokenizer load_tokenizer(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path j = fs::path(path) / "tokenizer.json";
    if (!fs::exists(j, ec))
      throw_input_error(path, "tokenizer", "a folder with tokenizer.json, a tokenizer.json or a .gguf",
                        "a folder without tokenizer.json");
    return Tokenizer::from_tokenizer_json(j.string());
  }
  auto m = MappedFile::open(path);  // non-blocking open, regular files only
  if (m->bytes().size() >= 4 && std::memcmp(m->bytes().data(), "GGUF", 4) == 0) return Tokenizer::from_gguf(GgufFile::open(path));
  return Tokenizer::from_tokenizer_json(path);
}

std::string tokenizer_identity(const Tokenizer& tok) {
  std::string buf;
  for (std::size_t i = 0; i < tok.vocab_size(); ++i) {
    auto t = tok.token(static_cast<std::int32_t>(i));
    buf += std::to_string(t.size());
    buf += tok.is_special(static_cast<std::int32_t>(i)) ? 's' : 'n';
    buf.append(t.data(), t.size());
  }
  // Probe text: letters, digits, whitespace runs, punctuation, code and non-Latin script.
  static const char* probe =
      "Hello, World! It's 2024-11-30:  x=1234567;\n\tdef f(a_b):\n        return a_b**2  # ok\n"
      "  «quotes» — naïve café, Ελληνικά, русский, 日本語のテキスト, 한국어 😀\r\n  \n\nif (p != NULL) { *p++ = 0; }";
  for (auto id : tok.encode(probe, false)) {
    buf += ',';
    buf += std::to_string(id);
  }
  return "tok-sha256:" + sha256_hex({reinterpret_cast<const std::uint8_t*>(buf.data()), buf.size()});
}

namespace {

std::string run_capture(const std::string& cmd) {
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw_input_error(cmd, "run", "a command that starts", std::strerror(errno));
  std::string out;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) throw_input_error(cmd, "exit status", "0", fmt::format("{}", rc));
  return out;
}

std::string read_file(const std::string& path) {
  return read_text_file(path, kDataTextCap, "a corpus text file");
}

// Keeps the valid UTF-8 only (the tokenizer refuses anything else): invalid bytes become '?'.
std::string clean_utf8(std::string s) {
  std::size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (!ok || (len == 1 && c == 0)) {
      s[i++] = '?';
      continue;
    }
    i += len;
  }
  return s;
}

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::string corpus_data_dir() {
  if (const char* e = std::getenv("KC_CORPUS_DIR"); e && *e) return e;
  return KC_CORPUS_DIR_DEFAULT;
}

std::vector<SourceDoc> default_sources() {
  const std::string dir = corpus_data_dir();
  const std::string manifest = (fs::path(dir) / "manifest.tsv").string();
  if (!is_file(manifest))
    throw_input_error(manifest, "file",
                      "the default corpus's manifest (set KC_CORPUS_DIR to the data/corpus folder of kerncheck's "
                      "sources, or give --prose/--code files)",
                      "no such file");
  std::string bible;
  for (const char* p : {"/usr/bin/bible", "/usr/games/bible", "/usr/local/bin/bible"})
    if (is_file(p)) bible = p;
  const std::string devil = "/usr/share/dictd/devil.dict.dz";
  std::vector<std::string> missing;
  if (bible.empty()) missing.push_back("bible-kjv");
  // The text package (bible-kjv-text) is not probed by path: its layout varies; running `bible` reports it.
  if (!is_file(devil)) missing.push_back("dict-devil");
  if (!missing.empty()) {
    std::string list;
    for (auto& m : missing) list += " " + m;
    throw_input_error("default corpus", "sources",
                      "the packages bible-kjv, bible-kjv-text and dict-devil (`apt-get install bible-kjv "
                      "bible-kjv-text dict-devil`, as scripts/demo.sh does), or --prose/--code files",
                      "missing packages:" + list);
  }
  // manifest.tsv: domain, name, bytes, sha256, origin (tab-separated; '#' starts a comment line). Prose comes
  // from the Debian packages, code from the files shipped beside the manifest; every one must have the
  // pinned bytes, so the corpus is the same on every machine.
  std::vector<SourceDoc> docs;
  std::istringstream in(read_file(manifest));
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> col;
    std::size_t at = 0;
    for (;;) {
      auto t = line.find('\t', at);
      col.push_back(line.substr(at, t == std::string::npos ? std::string::npos : t - at));
      if (t == std::string::npos) break;
      at = t + 1;
    }
    const std::string where = fmt::format("line {}", lineno);
    if (col.size() != 5 || (col[0] != "prose" && col[0] != "code") || col[3].size() != 64)
      throw_input_error(manifest, where,
                        "5 tab-separated columns: domain (prose|code), name, bytes, sha256 (64 hex), origin",
                        line.substr(0, 80));
    const std::string& name = col[1];
    std::string text, how;
    if (col[0] == "prose" && name == "kjv") {
      how = bible + " gen1:1-rev22:21";
      try {
        text = run_capture(bible + " gen1:1-rev22:21 2>/dev/null");
      } catch (const Error&) {
        throw_input_error(bible, "the King James text",
                          "its text (`apt-get install bible-kjv bible-kjv-text dict-devil`)",
                          "a failing command");
      }
    } else if (col[0] == "prose" && name == "devil") {
      how = "gzip -dc " + devil;
      text = run_capture("gzip -dc " + devil);
    } else if (col[0] == "code") {
      how = (fs::path(dir) / name).string();
      text = read_file(how);
    } else {
      throw_input_error(manifest, where + " name", "kjv or devil (the prose sources kerncheck knows)", name);
    }
    const std::string got = sha256_hex({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
    if (got != col[3] || std::to_string(text.size()) != col[2])
      fail("default corpus source {} ({}): expected {} bytes with sha256 {} ({}), got {} bytes with sha256 {}; "
           "the corpus would differ from everyone else's. Install the pinned package version, or give "
           "--prose/--code files",
           name, how, col[2], col[3], col[4], text.size(), got);
    docs.push_back({col[0], name, clean_utf8(std::move(text))});
  }
  if (docs.empty()) throw_input_error(manifest, "sources", "at least one prose or code line", "none");
  return docs;
}

std::string sources_identity(const std::vector<SourceDoc>& docs) {
  std::string buf;
  for (auto& d : docs) {
    buf += d.domain;
    buf += ' ';
    buf += sha256_hex({reinterpret_cast<const std::uint8_t*>(d.text.data()), d.text.size()});
    buf += '\n';
  }
  return "src-sha256:" + sha256_hex({reinterpret_cast<const std::uint8_t*>(buf.data()), buf.size()});
}

std::vector<SourceDoc> read_sources(const std::vector<std::string>& prose,
                                    const std::vector<std::string>& code) {
  std::vector<SourceDoc> docs;
  for (auto& f : prose) docs.push_back({"prose", f, clean_utf8(read_file(f))});
  for (auto& f : code) docs.push_back({"code", f, clean_utf8(read_file(f))});
  return docs;
}

namespace {

// Cuts a window of n tokens from doc at a line start near `at`; false when the rest is too short.
bool cut_window(const SourceDoc& d, std::size_t at, std::int64_t n, const Tokenizer& tok, CorpusSegment& s,
                std::vector<std::int32_t>& out) {
  const std::string& t = d.text;
  if (at > 0) {
    auto nl = t.find('\n', at);
    if (nl == std::string::npos) return false;
    at = nl + 1;
  }
  std::size_t len = static_cast<std::size_t>(n) * 6 + 64;
  for (;;) {
    std::size_t end = std::min(t.size(), at + len);
    if (end < t.size()) {  // end at a line break (a whole UTF-8 character)
      auto nl = t.find('\n', end);
      end = nl == std::string::npos ? t.size() : nl + 1;
    }
    std::vector<std::int32_t> ids = tok.encode(std::string_view(t).substr(at, end - at), false);
    if (static_cast<std::int64_t>(ids.size()) > n) {  // one more than needed: the last window token is whole
      ids.resize(n);
      s.byte_offset = static_cast<std::int64_t>(at);
      s.offsets.clear();
      std::size_t pos = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        if (i > 0) s.offsets.push_back(static_cast<std::int64_t>(pos));
        pos += tok.decode_bytes({&ids[i], 1}).size();
      }
      // The window's bytes are a prefix of the source slice; extend to a whole UTF-8 character.
      std::size_t e = at + pos;
      while (e < t.size() && (static_cast<unsigned char>(t[e]) >> 6) == 2) ++e;
      s.text = t.substr(at, e - at);
      out = std::move(ids);
      return true;
    }
    if (end >= t.size()) return false;
    len *= 2;
  }
}

}  // namespace

Corpus build_corpus(const CorpusOptions& o, const std::vector<SourceDoc>& docs, const Tokenizer& tok,
                    const std::string& tokenizer_origin) {
  Corpus c;
  c.tokenizer_id = tokenizer_identity(tok);
  c.tokenizer_origin = tokenizer_origin;
  c.vocab = static_cast<std::int64_t>(tok.vocab_size());
  c.preset = o.preset;
  c.seed = o.seed;
  c.sources_id = sources_identity(docs);
  std::vector<std::string> domains;
  for (const char* d : {"prose", "code"})
    for (auto& doc : docs)
      if (doc.domain == d) {
        domains.push_back(d);
        break;
      }
  if (domains.empty())
    throw_input_error("corpus sources", "documents", "at least one prose or code document to cut the corpus from",
                      "none");
  for (auto depth : o.depths) {
    for (std::int64_t j = 0; j < o.segments_per_depth.value_or(0); ++j) {
      const std::string& dom = domains[j % domains.size()];
      std::vector<const SourceDoc*> pool;
      for (auto& d : docs)
        if (d.domain == dom) pool.push_back(&d);
      // Prose alternates between its documents; code picks seeded files. A window that does not fit is
      // retried elsewhere (deterministically); documents too short for the depth are skipped.
      std::uint64_t st = o.seed ^ (static_cast<std::uint64_t>(depth) << 20) ^ static_cast<std::uint64_t>(j);
      CorpusSegment s;
      std::vector<std::int32_t> ids;
      bool ok = false;
      for (int attempt = 0; attempt < 64 && !ok; ++attempt) {
        std::size_t pick = dom == "prose" && attempt == 0
                               ? static_cast<std::size_t>(j / domains.size()) % pool.size()
                               : static_cast<std::size_t>(splitmix(st) % pool.size());
        const SourceDoc& d = *pool[pick];
        const std::size_t need = static_cast<std::size_t>(depth + 1) * 3;  // bytes, a low estimate
        if (d.text.size() < need) continue;
        std::size_t at = static_cast<std::size_t>(splitmix(st) % (d.text.size() - need + 1));
        if (attempt >= 32) at = 0;
        ok = cut_window(d, at, depth + 1, tok, s, ids);
        if (ok) s.source = d.name;
      }
      if (!ok) {
        std::string files;  // the documents of this domain: the message names them
        for (const SourceDoc* d : pool) files += (files.empty() ? "" : ", ") + d->name;
        throw_input_error(files, "length",
                          fmt::format("a {} document of at least {} tokens for a segment of depth {} (give "
                                      "longer --{} files)",
                                      dom, depth + 1, depth, dom),
                          "none that long");
      }
      s.name = fmt::format("{}-d{}-{}", dom, depth, j);
      s.domain = dom;
      s.depth = depth;
      s.decode_last = o.decode_last.value_or(0);
      s.token_begin = static_cast<std::int64_t>(c.tokens.size());
      c.tokens.insert(c.tokens.end(), ids.begin(), ids.end());
      c.segments.push_back(std::move(s));
    }
  }
  return c;
}

namespace {

std::string tokens_checksum(std::span<const std::int32_t> t) {
  return "xxh3:" + fmt::format("{:016x}", xxh64({reinterpret_cast<const std::uint8_t*>(t.data()),
                                                  t.size() * sizeof(std::int32_t)}));
}

}  // namespace

CorpusSegment answer_segment(const Tokenizer& tok, std::span<const std::int32_t> prompt,
                             std::span<const std::int32_t> answer) {
  if (prompt.size() < 2)
    fail("prompt: expected at least 2 tokens (one prefill position before the decoded answer), got {}",
         prompt.size());
  if (answer.empty()) fail("answer: expected at least one generated token, got none");
  CorpusSegment s;
  s.domain = "answer";
  s.depth = static_cast<std::int64_t>(prompt.size() + answer.size()) - 1;
  s.decode_last = static_cast<std::int64_t>(answer.size());
  std::string bytes;
  auto add = [&](std::int32_t id, bool scored) {
    if (scored) s.offsets.push_back(static_cast<std::int64_t>(bytes.size()));
    bytes += tok.decode_bytes({&id, 1});
  };
  for (std::size_t i = 0; i < prompt.size(); ++i) add(prompt[i], i > 0);
  for (auto id : answer) add(id, true);
  s.text = clean_utf8(std::move(bytes));
  return s;
}

void write_corpus(const std::string& path, Corpus& c) {
  c.checksum = tokens_checksum(c.tokens);
  json segs = json::array();
  for (auto& s : c.segments)
    segs.push_back({{"name", s.name},
                    {"domain", s.domain},
                    {"depth", s.depth},
                    {"decode_last", s.decode_last},
                    {"token_begin", s.token_begin},
                    {"source", s.source},
                    {"byte_offset", s.byte_offset},
                    {"text", s.text},
                    {"offsets", s.offsets}});
  std::map<std::string, std::string> md{{"kerncheck.format", "corpus"},
                                        {"kerncheck.version", "1"},
                                        {"tokenizer", c.tokenizer_id},
                                        {"tokenizer_origin", c.tokenizer_origin},
                                        {"vocab", std::to_string(c.vocab)},
                                        {"preset", c.preset},
                                        {"seed", std::to_string(c.seed)},
                                        {"segments", segs.dump()},
                                        {"checksum", c.checksum}};
  if (!c.generation.empty()) md["generation"] = c.generation;
  if (!c.sources_id.empty()) md["sources"] = c.sources_id;
  std::vector<std::uint8_t> bytes(c.tokens.size() * 4);
  std::memcpy(bytes.data(), c.tokens.data(), bytes.size());
  Tensor t = make_tensor(DType::int32, {static_cast<std::int64_t>(c.tokens.size())}, std::move(bytes), "tokens");
  write_safetensors(path, {{"tokens", t}}, md);
}

Corpus read_corpus(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  const auto& md = f.metadata();
  auto get = [&](const char* key) -> const std::string& {
    auto it = md.find(key);
    if (it == md.end()) throw_input_error(path, std::string("metadata ") + key, "a string", "nothing");
    return it->second;
  };
  if (get("kerncheck.format") != "corpus")
    throw_input_error(path, "metadata kerncheck.format", "\"corpus\"", get("kerncheck.format"));
  if (get("kerncheck.version") != "1")
    throw_input_error(path, "metadata kerncheck.version", "\"1\"", get("kerncheck.version"));
  Corpus c;
  c.path = path;
  c.tokenizer_id = get("tokenizer");
  c.tokenizer_origin = get("tokenizer_origin");
  c.preset = get("preset");
  try {
    c.vocab = std::stoll(get("vocab"));
    c.seed = std::stoull(get("seed"));
  } catch (const std::exception&) {
    throw_input_error(path, "metadata vocab/seed", "decimal integers", get("vocab") + " / " + get("seed"));
  }
  if (c.vocab < 1 || c.vocab > (std::int64_t{1} << 31))
    throw_input_error(path, "metadata vocab", "1 … 2^31", std::to_string(c.vocab));
  Tensor t = f.tensor("tokens");
  if (t.dtype != DType::int32 || t.shape.size() != 1)
    throw_input_error(path, "tokens", "an I32 vector", std::string(dtype_name(t.dtype)) + " " + t.shape_str());
  c.tokens.resize(t.shape[0]);
  std::memcpy(c.tokens.data(), t.bytes.data(), c.tokens.size() * 4);
  c.checksum = get("checksum");
  if (auto it = md.find("sources"); it != md.end()) c.sources_id = it->second;
  if (auto it = md.find("generation"); it != md.end()) {
    c.generation = it->second;
    if (!json::accept(c.generation))
      throw_input_error(path, "metadata generation", "a JSON object (generation settings)", "invalid JSON");
  }
  if (tokens_checksum(c.tokens) != c.checksum)
    throw_input_error(path, "metadata checksum", c.checksum + " (the tokens' checksum)", tokens_checksum(c.tokens));
  for (std::size_t i = 0; i < c.tokens.size(); ++i)
    if (c.tokens[i] < 0 || c.tokens[i] >= c.vocab)
      throw_input_error(path, fmt::format("tokens[{}]", i), fmt::format("an id in [0, {})", c.vocab),
                        std::to_string(c.tokens[i]));
  json segs;
  try {
    segs = json::parse(get("segments"));
  } catch (const json::exception&) {
    throw_input_error(path, "metadata segments", "a JSON list", "invalid JSON");
  }
  if (!segs.is_array() || segs.empty())
    throw_input_error(path, "metadata segments", "a non-empty JSON list", segs.type_name());
  std::int64_t next = 0;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const json& j = segs[i];
    std::string where = fmt::format("metadata segments[{}]", i);
    CorpusSegment s;
    try {
      s.name = j.at("name").get<std::string>();
      s.domain = j.at("domain").get<std::string>();
      s.depth = j.at("depth").get<std::int64_t>();
      s.decode_last = j.at("decode_last").get<std::int64_t>();
      s.token_begin = j.at("token_begin").get<std::int64_t>();
      s.source = j.value("source", std::string());
      s.byte_offset = j.value("byte_offset", std::int64_t{0});
      s.text = j.value("text", std::string());
      s.offsets = j.value("offsets", std::vector<std::int64_t>{});
    } catch (const json::exception& e) {
      throw_input_error(path, where, "name, domain (strings), depth, decode_last, token_begin (integers)",
                        e.what());
    }
    if (s.token_begin != next)
      throw_input_error(path, where + ".token_begin", std::to_string(next), std::to_string(s.token_begin));
    if (s.depth < 1 || s.depth + 1 > static_cast<std::int64_t>(c.tokens.size()) - s.token_begin)
      throw_input_error(path, where + ".depth",
                        fmt::format("1 … {} (tokens left)", static_cast<std::int64_t>(c.tokens.size()) - s.token_begin - 1),
                        std::to_string(s.depth));
    if (s.decode_last < 0 || s.decode_last >= s.depth)
      throw_input_error(path, where + ".decode_last", fmt::format("0 … {}", s.depth - 1),
                        std::to_string(s.decode_last));
    if (!s.offsets.empty()) {
      bool ok = static_cast<std::int64_t>(s.offsets.size()) == s.depth;
      for (auto off : s.offsets) ok = ok && off >= 0 && off <= static_cast<std::int64_t>(s.text.size());
      if (!ok)
        throw_input_error(path, where + ".offsets",
                          fmt::format("{} byte offsets within the text", s.depth), "something else");
    }
    next = s.token_begin + s.depth + 1;
    c.segments.push_back(std::move(s));
  }
  if (next != static_cast<std::int64_t>(c.tokens.size()))
    throw_input_error(path, "tokens", fmt::format("{} tokens (the segments' windows)", next),
                      std::to_string(c.tokens.size()));
  return c;
}

}  // namespace kc
