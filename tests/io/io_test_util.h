// Shared by the io tests: a scratch directory, file writing, and error-message checks.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/tensor.h"

namespace kc::test {

// A fresh directory per test (removed afterwards).
class TmpDir {
 public:
  TmpDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() / (std::string("kc_io_") + info->test_suite_name() + "_" +
                                                     info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TmpDir() { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Runs fn, expects a kc::Error whose message contains every one of `parts`; returns the message.
inline std::string expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    return msg;
  }
  ADD_FAILURE() << "expected kc::Error";
  return {};
}

// Random bytes for a tensor of dtype/shape; for odd-length packed types the unused high nibble is 0
// (what every writer produces), so byte-for-byte round trips hold.
inline Tensor random_tensor(DType d, std::vector<std::int64_t> shape, std::uint32_t seed) {
  std::size_t n = 1;
  for (auto s : shape) n *= static_cast<std::size_t>(s);
  std::vector<std::uint8_t> bytes(storage_bytes(d, n));
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  if (d == DType::boolean)
    for (auto& b : bytes) b &= 1;
  if (is_packed4(d) && n % 2) bytes.back() &= 0x0F;
  return make_tensor(d, std::move(shape), std::move(bytes), "<random>");
}

inline std::vector<DType> all_dtypes() {
  std::vector<DType> v;
  for (int i = 0; i < kDTypeCount; ++i) v.push_back(static_cast<DType>(i));
  return v;
}

inline std::vector<std::uint8_t> bytes_of(const Tensor& t) { return {t.bytes.begin(), t.bytes.end()}; }

}  // namespace kc::test
