// The readers' row validation (src/golden/golden.cpp): a branch-free scan per chunk of 65536 rows, walked
// row by row only when it fails. Every invariant is broken once, in the second chunk, and the reader must
// refuse the file naming the field; legitimate patterns that look like violations on the flat arrays (a
// row starting with a higher log-prob or the same id as the previous row's end) must pass.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "golden/golden.h"

namespace kc {
namespace {

constexpr int kN = 70000, kK = 4, kVocab = 100, kBad = 69000;  // kBad: a row in the second chunk

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kc_golden_validation_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

GoldenBuffers clean_golden() {
  GoldenBuffers g;
  g.k = kK;
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kK; ++j) {
      // Row i ends with id kK - 1 + i % 3; row i + 1 starts with (i + 1) % 3: equal across the boundary
      // for some rows, and every row starts above the previous row's last log-prob.
      g.top_ids.push_back(j + i % 3);
      g.top_logprobs.push_back(std::log(0.5f) - static_cast<float>(j));
    }
    g.other_logprob.push_back(-5);
    g.token.push_back(i % 7);
    g.token_logprob.push_back(-1);
    g.segment.push_back(0);
    g.depth.push_back(i + 1);
    g.phase.push_back(i % 2);
    g.flags.push_back(0);
  }
  return g;
}

GoldenMeta meta() {
  GoldenMeta m;
  m.k = kK;
  m.vocab = kVocab;
  m.n = kN;
  m.identity = {"model-x", "tok-y", "corpus-z"};
  m.segments = {Segment{"s", "code", 1, 0, "", {}}};
  return m;
}

// Writes the golden (the writer computes a matching checksum) and returns the reader's error, "" if none.
std::string read_error(const GoldenBuffers& g) {
  std::string p = tmp("g.safetensors");
  write_golden(p, meta(), g.view());
  std::string err, deferred;
  try {
    read_golden(p);
  } catch (const Error& e) {
    err = e.what();
  }
  // The deferred check (kerncheck test's one pass), rows passed in pieces and out of order, must refuse
  // the file with the same message.
  try {
    Golden d = read_golden(p, true);
    EXPECT_TRUE(d.pending);
    for (std::int64_t b : {std::int64_t{40000}, std::int64_t{0}, std::int64_t{12345}})
      d.pending->rows(b, b == 0 ? 12345 : b == 12345 ? 40000 : kN);
    d.pending->finish();
  } catch (const Error& e) {
    deferred = e.what();
  }
  EXPECT_EQ(deferred, err);
  std::filesystem::remove(p);
  return err;
}

TEST(GoldenValidation, CleanFileWithBoundaryLookalikesPasses) {
  GoldenBuffers g = clean_golden();
  // The same id on both sides of a row boundary (row 2 ends with id 5, row 3 starts with 0: make it 5 and
  // keep row 3 distinct and in range).
  g.top_ids[3 * kK] = 5;
  g.top_ids[3 * kK + 1] = 6, g.top_ids[3 * kK + 2] = 7, g.top_ids[3 * kK + 3] = 8;
  EXPECT_EQ(g.top_ids[3 * kK - 1], 5);
  EXPECT_EQ(read_error(g), "");
}

TEST(GoldenValidation, EveryInvariantIsChecked) {
  const std::size_t r = kBad, t = static_cast<std::size_t>(kBad) * kK;
  struct Case {
    const char* expect;
    std::function<void(GoldenBuffers&)> breakit;
  } cases[] = {
      {"top_ids[69000, 2]: expected an id in [0, 100), got -1", [&](auto& g) { g.top_ids[t + 2] = -1; }},
      {"top_ids[69000, 0]: expected an id in [0, 100), got 100", [&](auto& g) { g.top_ids[t] = 100; }},
      {"top_logprobs[69000, 1]: expected a log-prob ≤ 0, got nan",
       [&](auto& g) { g.top_logprobs[t + 1] = NAN; }},
      {"top_logprobs[69000, 0]: expected a log-prob ≤ 0, got 0.5",
       [&](auto& g) { g.top_logprobs[t] = 0.5f; }},
      {"top_logprobs[69000]: expected non-increasing log-probs and distinct ids at 3",
       [&](auto& g) { g.top_logprobs[t + 3] = g.top_logprobs[t + 2] + 0.25f; }},
      {"top_logprobs[69000]: expected non-increasing log-probs and distinct ids at 2",
       [&](auto& g) { g.top_ids[t + 2] = g.top_ids[t + 1]; }},
      {"other_logprob[69000]: expected a log-prob ≤ 0, got nan", [&](auto& g) { g.other_logprob[r] = NAN; }},
      {"other_logprob[69000]: expected a log-prob ≤ 0, got 1", [&](auto& g) { g.other_logprob[r] = 1; }},
      {"token[69000]: expected an id in [0, 100), got 100", [&](auto& g) { g.token[r] = 100; }},
      {"token[69000]: expected an id in [0, 100), got -3", [&](auto& g) { g.token[r] = -3; }},
      {"token_logprob[69000]: expected a log-prob ≤ 0, got nan", [&](auto& g) { g.token_logprob[r] = NAN; }},
      {"segment[69000]: expected an index in [0, 1), got 1", [&](auto& g) { g.segment[r] = 1; }},
      {"segment[69000]: expected an index in [0, 1), got -1", [&](auto& g) { g.segment[r] = -1; }},
      {"depth[69000]: expected ≥ 0, got -1", [&](auto& g) { g.depth[r] = -1; }},
      {"phase[69000]: expected 0 or 1, got 2", [&](auto& g) { g.phase[r] = 2; }},
      {"flags[69000]: the reference row is not finite", [&](auto& g) { g.flags[r] = kFlagPosInf; }},
  };
  for (auto& c : cases) {
    GoldenBuffers g = clean_golden();
    c.breakit(g);
    std::string err = read_error(g);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected: " << c.expect << "\ngot: " << err;
  }
}

TEST(GoldenValidation, CandidateRows) {
  std::string gp = tmp("cg.safetensors");
  write_golden(gp, meta(), clean_golden().view());
  Golden g = read_golden(gp);
  auto make = [&](std::int32_t bad_top1, std::uint8_t bad_cov, std::uint8_t bad_flags) {
    CandidateBuffers c;
    c.k = kK;
    std::vector<float> lp(kK, -2.0f);
    std::uint8_t cov[kK] = {1, 1, 1, 1};
    for (int i = 0; i < kN; ++i) {
      cov[1] = i == kBad ? bad_cov : 1;
      c.push(lp, -3.0f, i == kBad ? bad_top1 : 1, -0.5f, -1.0f, i == kBad ? bad_flags : 0, cov);
    }
    std::string p = tmp("c.safetensors");
    write_candidate(p, candidate_meta_for(g, {"test", "", ""}), c.view());
    std::string err, deferred;
    try {
      read_candidate(p);
    } catch (const Error& e) {
      err = e.what();
    }
    try {
      Candidate d = read_candidate(p, true);
      d.pending->rows(30000, kN);
      d.pending->rows(0, 30000);
      d.pending->finish();
    } catch (const Error& e) {
      deferred = e.what();
    }
    EXPECT_EQ(deferred, err);
    std::filesystem::remove(p);
    return err;
  };
  EXPECT_EQ(make(1, 1, 0), "");
  EXPECT_EQ(make(-1, 1, kFlagNaN), "");  // a broken row may have no top-1
  EXPECT_NE(make(-1, 1, 0).find("top1_id[69000]: expected an id in [0, 100), got -1"), std::string::npos);
  EXPECT_NE(make(100, 1, kFlagNaN).find("top1_id[69000]: expected an id in [0, 100), got 100"),
            std::string::npos);
  EXPECT_NE(make(1, 2, 0).find("covered[69000, 1]: expected 0 or 1, got 2"), std::string::npos);
  std::filesystem::remove(gp);
}

}  // namespace
}  // namespace kc
