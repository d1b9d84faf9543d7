// SplitXxh3 (src/golden/golden.cpp): XXH3-64 of a stream of row-major parts hashed out of order, block sums
// chained at the end. It must equal libxxhash's one-shot XXH3_64bits of the concatenated bytes for every
// stream length (block and stripe boundaries falling anywhere in and between the parts), every row order
// and every way of cutting the rows into ranges, including ranges hashed from several threads.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

#include "golden/golden.h"

namespace kc {
namespace {

struct Stream {
  std::vector<std::vector<std::uint8_t>> parts;
  std::vector<std::span<const std::uint8_t>> spans() const {
    std::vector<std::span<const std::uint8_t>> s;
    for (auto& p : parts) s.emplace_back(p);
    return s;
  }
  std::uint64_t reference() const {
    std::vector<std::uint8_t> all;
    for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return XXH3_64bits(all.data(), all.size());
  }
};

// Parts of widths (bytes per row) like a golden's: 4k-byte rows, 4-byte rows, 1-byte rows, an empty part.
Stream make_stream(std::int64_t rows, const std::vector<int>& widths, std::mt19937_64& rng) {
  Stream s;
  for (int w : widths) {
    std::vector<std::uint8_t> p(static_cast<std::size_t>(rows) * w);
    for (auto& b : p) b = static_cast<std::uint8_t>(rng());
    s.parts.push_back(std::move(p));
  }
  return s;
}

// Cuts [0, rows) into random ranges, visits (part, range) pairs in a random order.
std::uint64_t split_digest(const Stream& s, std::int64_t rows, std::mt19937_64& rng, int threads = 1) {
  SplitXxh3 h(s.spans(), rows);
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (std::int64_t b = 0; b < rows;) {
    std::int64_t e = std::min<std::int64_t>(rows, b + 1 + static_cast<std::int64_t>(rng() % 3000));
    ranges.emplace_back(b, e);
    b = e;
  }
  std::vector<std::pair<std::size_t, std::size_t>> work;  // (part, range)
  for (std::size_t p = 0; p < s.parts.size(); ++p)
    for (std::size_t r = 0; r < ranges.size(); ++r) work.emplace_back(p, r);
  std::shuffle(work.begin(), work.end(), rng);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (std::size_t i = t; i < work.size(); i += threads)
        h.add_rows(work[i].first, ranges[work[i].second].first, ranges[work[i].second].second);
    });
  for (auto& th : pool) th.join();
  return h.digest();
}

// As the judge passes rows: groups of `group` rows in order, every part of a group before the next group
// (the first part's blocks are then chained in place, the others stored).
std::uint64_t in_order_digest(const Stream& s, std::int64_t rows, std::int64_t group) {
  SplitXxh3 h(s.spans(), rows);
  for (std::int64_t b = 0; b < rows; b += group)
    for (std::size_t p = 0; p < s.parts.size(); ++p) h.add_rows(p, b, std::min(rows, b + group));
  return h.digest();
}

TEST(SplitXxh3, InOrderGroupsChainInPlace) {
  std::mt19937_64 rng(17);
  for (std::int64_t rows : {1000, 2048, 4097, 20000, 65537})
    for (std::int64_t group : {1, 7, 2048, 100000}) {
      Stream s = make_stream(rows, {80, 80, 4, 4, 4, 4, 4, 1, 1}, rng);
      EXPECT_EQ(in_order_digest(s, rows, group), s.reference()) << "rows " << rows << ", group " << group;
    }
}

TEST(SplitXxh3, EqualsOneShotXxh3ForManyLengthsAndOrders) {
  std::mt19937_64 rng(7);
  const std::vector<std::vector<int>> layouts = {
      {80, 80, 4, 4, 4, 4, 4, 1, 1},  // a golden at k = 20
      {80, 4, 4, 4, 4, 1, 0},         // a candidate without `covered`
      {1},
      {3, 5, 7},
      {1024},
      {64, 1},
  };
  int checked = 0;
  for (auto& widths : layouts)
    for (std::int64_t rows : {1, 2, 3, 15, 16, 17, 63, 64, 65, 1000, 1023, 1025, 4097, 20000, 65537}) {
      Stream s = make_stream(rows, widths, rng);
      const std::uint64_t want = s.reference();
      EXPECT_EQ(split_digest(s, rows, rng), want) << "rows " << rows << ", layout " << widths.size();
      EXPECT_EQ(split_digest(s, rows, rng), want) << "rows " << rows << " (another cut)";
      ++checked;
    }
  EXPECT_EQ(checked, 6 * 15);
}

TEST(SplitXxh3, ExactLengthsAroundBlockAndStripeEdges) {
  // One part of 1-byte rows: the stream length is the row count; lengths just around 64-byte stripes and
  // 1 kB blocks past the 64 kB threshold of the block path.
  std::mt19937_64 rng(11);
  for (std::int64_t base : {std::int64_t{1} << 16, std::int64_t{1} << 17, std::int64_t{100 * 1024}})
    for (std::int64_t d : {-65, -64, -63, -1, 0, 1, 63, 64, 65, 1023, 1024, 1025}) {
      const std::int64_t rows = base + d;
      Stream s = make_stream(rows, {1}, rng);
      EXPECT_EQ(split_digest(s, rows, rng), s.reference()) << "length " << rows;
    }
}

TEST(SplitXxh3, ThreadsAndAChangedByteChangesTheDigest) {
  std::mt19937_64 rng(3);
  const std::int64_t rows = 50000;
  Stream s = make_stream(rows, {80, 80, 4, 4, 1, 1}, rng);
  const std::uint64_t want = s.reference();
  EXPECT_EQ(split_digest(s, rows, rng, 4), want);
  s.parts[4][12345] ^= 1;  // one bit of the 1-byte part
  EXPECT_NE(split_digest(s, rows, rng, 4), want);
  EXPECT_EQ(split_digest(s, rows, rng, 3), s.reference());
}

}  // namespace
}  // namespace kc
