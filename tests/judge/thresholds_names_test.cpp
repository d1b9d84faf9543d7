// The thresholds file admits exactly the keys of the statistic table (metrics/statistics.h): every split
// statistic overall and under each split prefix, every run statistic overall only; anything else is refused
// with the file, the field and a suggestion.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/error.h"
#include "judge/judge.h"

namespace kc {
namespace {

std::string write_limits(const std::string& name, const std::string& limits) {
  const auto p = std::filesystem::temp_directory_path() / ("kc_th_" + std::to_string(::getpid()) + name);
  std::ofstream(p) << "[kerncheck]\nformat = \"thresholds\"\nversion = 1\n[limits]\n" << limits;
  return p.string();
}

std::string refusal(const std::string& key) {
  const std::string p = write_limits("bad.toml", "\"" + key + "\" = 1\n");
  try {
    read_thresholds(p);
  } catch (const Error& e) {
    std::filesystem::remove(p);
    return e.what();
  }
  std::filesystem::remove(p);
  return "";
}

TEST(ThresholdNames, EveryTableKeyIsAccepted) {
  std::string limits;
  int n = 0;
  for (const StatDef& d : statistics()) {
    limits += fmt::format("\"{}\" = {}\n", d.name, ++n);
    if (d.scope == StatScope::split)
      for (const char* prefix : {"domain.code.", "phase.prefill.", "phase.decode.", "depth.2048."})
        limits += fmt::format("\"{}{}\" = {}\n", prefix, d.name, ++n);
  }
  const std::string p = write_limits("all.toml", limits);
  Thresholds t = read_thresholds(p);
  std::filesystem::remove(p);
  EXPECT_EQ(static_cast<int>(t.limits.size()), n);
  EXPECT_EQ(n, 11 * 5 + 2);  // 11 split statistics × (overall + 4 prefixes) + 2 run statistics
  EXPECT_EQ(t.limits.at("depth.2048.kl_p99"), 3 * 5 + 5);  // the fourth statistic, its fifth key
}

TEST(ThresholdNames, UnknownOnesAreRefusedWithASuggestion) {
  EXPECT_NE(refusal("kl_mena").find("unknown statistic \"kl_mena\" (did you mean \"kl_mean\"?)"), std::string::npos);
  EXPECT_NE(refusal("domain.code.flip_rat").find("(did you mean \"domain.code.flip_rate\"?)"), std::string::npos);
  // A run statistic has no split value.
  const std::string r = refusal("phase.decode.sigma");
  EXPECT_NE(r.find("limits.\"phase.decode.sigma\""), std::string::npos) << r;
  EXPECT_NE(r.find("a per-split statistic"), std::string::npos) << r;
  EXPECT_NE(refusal("nll_diff_mea").find("(did you mean \"nll_diff_mean\"?)"), std::string::npos);
  EXPECT_EQ(refusal("sigma"), "");
}

}  // namespace
}  // namespace kc
