// The judge's options, one table: each row is a field of JudgeOptions with its flag (`kerncheck test`,
// `kerncheck merge`), its Python keyword (kerncheck.test()), its kind, its valid range and its help. The CLI
// declares its flags from it (cli/judge_flags.h), the Python module its keywords and signature, judge()
// validates with it: an option exists everywhere or nowhere, and is checked the same way.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "judge/judge.h"

namespace kc {

struct JudgeOptionDef {
  enum class Kind { real, count, flag };
  const char* flag;    // "--kl-factor"
  const char* python;  // "kl_factor"
  Kind kind;
  const char* help;
  double JudgeOptions::*real = nullptr;         // kind real
  std::int64_t JudgeOptions::*count = nullptr;  // kind count
  bool JudgeOptions::*on = nullptr;             // kind flag
  double lo = 0, hi = 0;                        // the valid range (real, count) …
  bool lo_open = false, hi_open = false;        // … with open ends where set
  double get(const JudgeOptions& o) const;      // the value as a number (a flag: 0 or 1)
  void set(JudgeOptions& o, double v) const;    // a count must be integral, a flag 0 or 1 (else refused)
  std::string range() const;                    // "in (0, 1)", "≥ 1", …
};

std::span<const JudgeOptionDef> judge_option_table();
const JudgeOptionDef* find_judge_option(std::string_view python_name);  // nullptr when unknown

// Refuses (exit 3) the first option outside its range, naming its flag and keyword.
void check_judge_options(const JudgeOptions& o);

}  // namespace kc
