// Text from inputs (corpus text, case names, file names) on its way to a terminal, XML or JSON.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace kc {

// Valid UTF-8: each byte that does not start a well-formed sequence (overlong, surrogate, > U+10FFFF,
// truncated) becomes U+FFFD.
std::string valid_utf8(std::string_view in);

// XML 1.0 text/attribute escaping of valid_utf8(in); characters XML cannot carry (C0 controls other than
// tab, newline, carriage return) become U+FFFD.
std::string xml_escape(std::string_view in);

// For the terminal: valid_utf8(in) with C0 and C1 control characters and DEL (escape sequences that would
// move the cursor or recolour the terminal) written as \xNN / \u{NN}; newline and tab kept when keep_lines.
std::string terminal_safe(std::string_view in, bool keep_lines = false);

// Every line kerncheck prints that carries text it did not write itself (file and segment names, a
// server's model name, a parser's message) goes out through this: terminal_safe(text, keep_lines = true).
void print_safe(std::FILE* stream, std::string_view text);
// The same for a printf format (the call sites' own layouts: "%-20s" columns and the like).
[[gnu::format(printf, 2, 3)]] void printf_safe(std::FILE* stream, const char* format, ...);

}  // namespace kc
