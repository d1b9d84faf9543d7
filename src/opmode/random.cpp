#include "opmode/random.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"

namespace kc::ops {

std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t SplitMix64::next() {
  state_ += 0x9E3779B97F4A7C15ull;
  return splitmix64_mix(state_);
}

double SplitMix64::unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }

std::string Distribution::text() const {
  switch (kind) {
    case Kind::normal:
      return fmt::format("normal({}, {})", a, b);
    case Kind::uniform:
      return fmt::format("uniform({}, {})", a, b);
    case Kind::constant:
      return fmt::format("const({})", a);
  }
  return "?";
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool parse_number(std::string_view s, double& out) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

}  // namespace

Distribution parse_distribution(std::string_view text, std::string_view where) {
  constexpr const char* kForms = "normal(mean, std), uniform(lo, hi) or const(v)";
  std::string_view s = trim(text);
  auto bad = [&](std::string_view why) -> Distribution {
    fail("{}: expected {}{}, got \"{}\"", where, kForms, why, text);
  };
  std::string_view name = s, args;
  if (auto open = s.find('('); open != std::string_view::npos) {
    if (s.back() != ')') return bad("");
    name = trim(s.substr(0, open));
    args = s.substr(open + 1, s.size() - open - 2);
  }
  std::vector<double> nums;
  if (!trim(args).empty()) {
    std::size_t start = 0;
    while (true) {
      auto comma = args.find(',', start);
      double v;
      if (!parse_number(args.substr(start, comma - start), v)) return bad(" (a finite number)");
      nums.push_back(v);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  Distribution d;
  if (name == "normal" || name == "gauss" || name == "gaussian") {
    d.kind = Distribution::Kind::normal;
    if (nums.empty()) nums = {0, 1};
    if (nums.size() != 2 || nums[1] < 0) return bad(" with std >= 0");
  } else if (name == "uniform") {
    d.kind = Distribution::Kind::uniform;
    if (nums.empty()) nums = {-1, 1};
    if (nums.size() != 2 || !(nums[0] <= nums[1])) return bad(" with lo <= hi");
  } else if (name == "const" || name == "constant") {
    d.kind = Distribution::Kind::constant;
    if (nums.size() != 1) return bad("");
    nums.push_back(0);
  } else {
    return bad("");
  }
  d.a = nums[0];
  d.b = nums[1];
  return d;
}

void generate(const Distribution& d, std::uint64_t seed, std::size_t input_index, std::span<double> out) {
  SplitMix64 rng(splitmix64_mix(seed + input_index));
  switch (d.kind) {
    case Distribution::Kind::constant:
      for (auto& v : out) v = d.a;
      return;
    case Distribution::Kind::uniform:
      for (auto& v : out) v = d.a + (d.b - d.a) * rng.unit();
      return;
    case Distribution::Kind::normal:
      for (std::size_t i = 0; i < out.size(); i += 2) {
        double u1 = 1.0 - rng.unit(), u2 = rng.unit();
        double r = std::sqrt(-2.0 * std::log(u1));
        double t = 2.0 * std::numbers::pi * u2;
        out[i] = d.a + d.b * (r * std::cos(t));
        if (i + 1 < out.size()) out[i + 1] = d.a + d.b * (r * std::sin(t));
      }
      return;
  }
}

}  // namespace kc::ops
