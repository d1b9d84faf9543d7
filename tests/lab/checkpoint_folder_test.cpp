// The checkpoint folder of a recording (lab/record_model.h): one recording per output at a time, another
// run's segments emptied, a finished run's folder (and lock) gone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "core/error.h"
#include "lab/record_model.h"

namespace kc {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointFolder, OneRecordingPerOutput) {
  const std::string out = ::testing::TempDir() + "kc_ckpt/c.st";
  fs::remove_all(fs::path(out).parent_path());
  fs::create_directories(fs::path(out).parent_path());
  std::optional<CheckpointFolder> first(std::in_place, out, "run-a");
  EXPECT_TRUE(fs::exists(out + ".partial/lock"));
  // A second recording onto the same output (its own open file, as another process has) is refused.
  EXPECT_EQ(error_of([&] { CheckpointFolder second(out, "run-a"); }),
            out + ": output: expected no other recording onto it, got one running (" + out +
                ".partial/lock is locked by another kerncheck record); wait for it to finish, or pick another -o");
  std::ofstream(out + ".partial/seg-00000.safetensors") << "x";
  first.reset();  // interrupted: the folder stays, the lock is free
  {
    CheckpointFolder same(out, "run-a");  // the same run resumes: its segments are kept
    EXPECT_TRUE(fs::exists(out + ".partial/seg-00000.safetensors"));
  }
  {
    CheckpointFolder other(out, "run-b");  // another run: emptied but for the lock, stamped with its key
    EXPECT_FALSE(fs::exists(out + ".partial/seg-00000.safetensors"));
    EXPECT_TRUE(fs::exists(out + ".partial/lock"));
    other.finish();
    EXPECT_FALSE(fs::exists(out + ".partial"));
  }
  CheckpointFolder again(out, "run-b");  // after a finished run: a fresh folder
  EXPECT_TRUE(fs::exists(out + ".partial/manifest.json"));
}

}  // namespace
}  // namespace kc
