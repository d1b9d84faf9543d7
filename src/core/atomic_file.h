// Files we write appear whole or not at all: write to "PATH.tmp.PID", fsync, rename over PATH.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kc {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // opens the temporary file; throws kc::Error
  ~AtomicFile();                          // removes the temporary file unless commit() ran
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const std::uint8_t> bytes);
  void write(std::string_view text) {
    write({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
  }
  void commit();  // flush, fsync, rename

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// One-shot helper for small outputs (reports).
void write_file_atomic(const std::string& path, std::string_view text);

}  // namespace kc
