// Every sentence the judge says, in one place: the numbers behind each finding, a finding in words, the
// verdict's headline, the reasons a run is INCONCLUSIVE, the notes, and the floor check's refusal and its
// advice. The text, JSON, HTML and JUnit reports, the sweep, the demo and kerncheck.test() read them from
// here (the pytest plugin through the JSON's `headline`).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "judge/judge.h"

namespace kc::words {

// ---- findings: the numbers behind each (Finding::detail) ----
std::string nonfinite_detail(std::int64_t positions);
std::string backstop_detail(std::uint64_t flips, std::uint64_t floor_flips,
                            const std::vector<std::pair<std::int64_t, double>>& first, bool failed);
std::string kl_limit_detail(double kl_factor, double floor, double kl_abs_min);
std::string floor_test_detail(const FloorTest& t, int family_size, double alpha, double power);
std::string flip_test_detail(const BinReport& b, int family_size, double alpha);
std::string not_measured();  // a thresholds limit whose split is too small in this run

// ---- a finding, and the verdict, in words ----
std::string sentence(const Finding& f);
// FAIL: the first finding (the strongest evidence) with how many splits (or bins) fail the same check;
// INCONCLUSIVE: the first reason; PASS: the check closest to its limit.
std::string headline(const JudgeReport& r);
// Over the reasons under a FAIL (they do not change it).
std::string caveats_title();

// ---- the depth profile ----
std::string depth_range(std::int64_t lo, std::int64_t hi);  // depths [lo, hi): "2000 … 2047", "7"
// The onset in one sentence: where the candidate leaves the floor, or why there is no onset (alpha: the
// onset's level, for the sentence).
std::string onset(const DepthProfile& p, double alpha);

// ---- INCONCLUSIVE reasons ----
std::string reason_no_reference();
std::string reason_few_positions(std::int64_t judged, std::int64_t need);
std::string reason_few_uncertain(std::uint64_t have, std::int64_t need);
// segments_per_depth: the most segments of one depth in the golden (0: unknown), for the advice's command.
std::string reason_power(const FloorTest& t, const JudgeOptions& o, std::int64_t segments_per_depth);
std::string reason_coverage(double mass, int k, double need);
std::string reason_other_golden(const std::string& calibrated_on, const std::string& this_one);

// ---- notes ----
// The floor runs do not differ (the same bits, or the same KL in every segment): the one sentence that the
// floor manifest (kerncheck floor) and every report say, with what the user can do. runs: how many.
std::string floor_no_spread(std::size_t runs, double kl_factor);
// A floor whose runs differ: how many, and what the floor test can detect in the splits that must
// detect the MDE target (`power`: "phase decode 1.31×, depth 256 1.18×").
std::string floor_spread(std::size_t runs, std::size_t distinct, const std::string& power, double power_level,
                         double mde_target);
std::string note_one_noise_run();
// `test --floor`: runs of the manifest with the same bits as an earlier run are one implementation, read once.
std::string floor_repeats(std::size_t runs, std::size_t distinct, const std::vector<std::string>& left_out);
// A split that must detect the MDE target where the floor runs do not differ (other splits have a spread).
std::string note_split_no_spread(const std::string& split);
// Why no floor test ran in noise mode ("" when one did): for the headline of a verdict on the fixed limits.
std::string fixed_limits_only(const std::string& why);
std::string note_thresholds_with_noise();
std::string floor_mismatch_note(const std::string& mismatch);

// ---- the floor check ----
std::string floor_mismatch(const FloorMismatch& m);  // "KV cache fp8 against a floor with KV cache …"
std::string floor_mismatch_advice(const FloorMismatch& m);  // what to do about it

}  // namespace kc::words
