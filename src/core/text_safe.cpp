#include "core/text_safe.h"

#include <fmt/format.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>

namespace kc {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";

// Length of the well-formed UTF-8 sequence at in[i] (RFC 3629), or 0.
std::size_t sequence_length(std::string_view in, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(in[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  std::size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > in.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(k) & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
  if (c == 0xED && b(1) > 0x9F) return 0;  // surrogates
  if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
  if (c == 0xF4 && b(1) > 0x8F) return 0;  // > U+10FFFF
  return n;
}

}  // namespace

std::string valid_utf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size();) {
    const std::size_t n = sequence_length(in, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(in.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string xml_escape(std::string_view in) {
  const std::string v = valid_utf8(in);
  std::string out;
  out.reserve(v.size());
  for (unsigned char ch : v) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\t': out += "&#9;"; break;
      case '\n': out += "&#10;"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (ch < 0x20) out += kReplacement;
        else out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string terminal_safe(std::string_view in, bool keep_lines) {
  const std::string v = valid_utf8(in);
  std::string out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(v[i]);
    if (keep_lines && (ch == '\n' || ch == '\t')) {
      out += static_cast<char>(ch);
    } else if (ch < 0x20 || ch == 0x7F) {
      out += fmt::format("\\x{:02x}", ch);
    } else if (ch == 0xC2 && i + 1 < v.size() && static_cast<unsigned char>(v[i + 1]) < 0xA0) {
      out += fmt::format("\\u{{{:02x}}}", static_cast<unsigned char>(v[i + 1]));  // C1 control (U+0080–U+009F)
      ++i;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

void print_safe(std::FILE* stream, std::string_view text) {
  const std::string safe = terminal_safe(text, true);
  std::fwrite(safe.data(), 1, safe.size(), stream);
}

void printf_safe(std::FILE* stream, const char* format, ...) {
  std::va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  print_safe(stream, text);
}

}  // namespace kc
