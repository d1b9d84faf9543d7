// Reproducible input generation: a specified PRNG (SplitMix64) and specified transforms, so a CSV row's
// inputs are the same bytes on every machine and can be regenerated in numpy (tests/py does).
//
//   state += 0x9E3779B97F4A7C15; z = state;
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31)
//   unit()    = (next() >> 11) * 2^-53                       ∈ [0, 1)
//   uniform   = lo + (hi − lo) · unit()
//   normal    = Box–Muller on u1 = 1 − unit() ∈ (0, 1], u2 = unit():
//               r = sqrt(−2 ln u1); z0 = r cos(2π u2), z1 = r sin(2π u2); mean + std · z (z0 then z1)
//   input i of a case uses stream seed splitmix64_mix(seed + i) (so adding an input leaves the others).
// libm's log/cos/sin are not correctly rounded everywhere; inputs are rounded to the op's input dtype
// afterwards, which hides such last-bit differences except in vanishingly rare ties.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kc::ops {

std::uint64_t splitmix64_mix(std::uint64_t z);  // the output function, no state

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double unit();  // [0, 1), 53 random bits

 private:
  std::uint64_t state_;
};

// A value distribution: "normal(mean, std)", "uniform(lo, hi)", "const(v)".
struct Distribution {
  enum class Kind { normal, uniform, constant } kind = Kind::normal;
  double a = 0, b = 1;
  std::string text() const;  // canonical spelling
};

// Parses the spellings above (spaces allowed, "normal" alone = normal(0,1), "uniform" = uniform(-1,1)).
// Throws kc::Error naming `where` with the expected forms.
Distribution parse_distribution(std::string_view s, std::string_view where);

// Fills out with values drawn from d using the stream for (seed, input_index).
void generate(const Distribution& d, std::uint64_t seed, std::size_t input_index, std::span<double> out);

}  // namespace kc::ops
