#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/mapped_file.h"
#include "core/parallel.h"
#include "core/text_safe.h"

namespace kc {
namespace {

struct Sum {
  double s = 0;
  void merge(const Sum& o) { s += o.s; }
};

TEST(Parallel, ReductionIsBitwiseIdenticalForAnyThreadCount) {
  std::vector<double> v(1 << 20);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1.0 / (1.0 + i) * ((i % 7) ? 1 : -3.3);
  auto run = [&] {
    return parallel_reduce<Sum>(v.size(), 4096, [&](Sum& acc, size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) acc.s += v[i];
    }).s;
  };
  set_thread_count(1);
  double one = run();
  for (int t : {2, 3, 8}) {
    set_thread_count(t);
    EXPECT_EQ(run(), one) << t << " threads";
  }
  set_thread_count(0);
}

TEST(Parallel, CoversEveryIndexOnceAndRethrows) {
  std::vector<int> hit(100003, 0);
  parallel_for(hit.size(), 1000, [&](size_t, size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) hit[i]++;
  });
  EXPECT_EQ(std::accumulate(hit.begin(), hit.end(), 0), 100003);
  EXPECT_EQ(*std::min_element(hit.begin(), hit.end()), 1);
  EXPECT_THROW(parallel_for(100, 1, [](size_t c, size_t, size_t) {
                 if (c == 57) fail("boom {}", c);
               }),
               Error);
}

TEST(AtomicFile, AppearsWholeOrNotAtAll) {
  std::string p = ::testing::TempDir() + "kc_atomic.txt";
  std::remove(p.c_str());
  {
    AtomicFile f(p);
    f.write("half");
    // destroyed without commit: nothing appears
  }
  EXPECT_FALSE(std::ifstream(p).good());
  write_file_atomic(p, "whole");
  auto m = MappedFile::open(p);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->bytes().data()), m->bytes().size()), "whole");
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Issue 20: a symlink planted at the temporary's name is never followed (O_EXCL | O_NOFOLLOW).
TEST(AtomicFile, PlantedSymlinkAtTheTemporaryIsNotFollowed) {
  const std::string dir = ::testing::TempDir() + "kc_plant/";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string victim = dir + "victim.txt", out = dir + "out.json";
  write_file_atomic(victim, "precious");
  std::filesystem::create_symlink(victim, fmt::format("{}.tmp.{}", out, ::getpid()));
  write_file_atomic(out, "report");
  EXPECT_EQ(slurp(out), "report");
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_TRUE(std::filesystem::is_symlink(fmt::format("{}.tmp.{}", out, ::getpid())));  // a live pid's
}

TEST(AtomicFile, RefusesInputsAndSpecialFiles) {
  const std::string dir = ::testing::TempDir() + "kc_inputs/";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string in = dir + "in.bin";
  write_file_atomic(in, "data");
  set_input_guard(true);  // as the CLI does
  auto m = MappedFile::open(in);  // now an input of this process
  try {
    write_file_atomic(in, "overwritten");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one of the inputs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(in), "data");
  forget_input(in);
  set_input_guard(false);
  write_file_atomic(in, "now an output");
  EXPECT_EQ(slurp(in), "now an output");
  try {
    write_file_atomic("/dev/null", "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--write-special"), std::string::npos) << e.what();
  }
  set_special_outputs_allowed(true);
  write_file_atomic("/dev/null", "x");  // in place: /dev/null stays a device
  set_special_outputs_allowed(false);
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  try {
    (void)read_text_file("/dev/zero", kConfigTextCap, "a test file");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/zero: file type: expected a regular file, got a character device"),
              std::string::npos)
        << e.what();
  }
}

TEST(AtomicFile, TextInputsAreInputsToo) {
  const std::string dir = ::testing::TempDir() + "kc_text_inputs/";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string in = dir + "t.toml", other = dir + "other.json", link = dir + "link.json";
  write_file_atomic(in, "[limits]\n");
  write_file_atomic(other, "{}");
  set_input_guard(true);
  EXPECT_EQ(read_text_file(in, kConfigTextCap, "a test file"), "[limits]\n");  // read, not mapped
  try {
    write_file_atomic(in, "a report");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("got the same file as the input"), std::string::npos) << e.what();
  }
  forget_input(in);
  set_input_guard(false);
  EXPECT_EQ(slurp(in), "[limits]\n");
  // Up front, read or not: by device and inode (a hard link too); empty and new paths are fine.
  std::filesystem::create_hard_link(in, link);
  EXPECT_NO_THROW(check_outputs_apart({in, ""}, {"", dir + "new.json", other}));
  try {
    check_outputs_apart({other, in}, {dir + "new.json", link});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              link + ": output: expected a path that is not one of the inputs, got the same file as the input " + in +
                  " (refusing to overwrite it)");
  }
}

TEST(TextSafe, PrintedThroughTerminalSafe) {
  const std::string path = ::testing::TempDir() + "kc_print_safe.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  printf_safe(f, "%-6s|%d\n", "a\x1b[2J", 7);
  print_safe(f, "model \x1b]0;x\x07\n");
  std::fclose(f);
  EXPECT_EQ(slurp(path), "a\\x1b[2J |7\nmodel \\x1b]0;x\\x07\n");
}

TEST(TextSafe, Utf8XmlAndTerminal) {
  EXPECT_EQ(valid_utf8("a\xff" "b\xc3\xa9\xe2\x82"), "a\xEF\xBF\xBD" "b\xc3\xa9\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(xml_escape("<a\x01&\xfe>"), "&lt;a\xEF\xBF\xBD&amp;\xEF\xBF\xBD&gt;");
  EXPECT_EQ(terminal_safe("x\x1b[2Jy\x7f\xc2\x9bz\n"), "x\\x1b[2Jy\\x7f\\u{9b}z\\x0a");
  EXPECT_EQ(terminal_safe("l1\nl2\t", true), "l1\nl2\t");
}

TEST(MappedFile, MissingFileNamesPath) {
  try {
    MappedFile::open("/nonexistent/x.npy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.npy"), std::string::npos);
  }
}

TEST(Hash, KnownVectors) {
  std::string abc = "abc";
  std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(abc.data()), abc.size());
  EXPECT_EQ(sha256_hex(b), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Xxh64 h;
  h.update(b.subspan(0, 1));
  h.update(b.subspan(1));
  EXPECT_EQ(h.digest(), xxh64(b));
}

}  // namespace
}  // namespace kc
