// Reading input files: a read-only memory map of a whole file (no copies of large inputs; empty files map
// to an empty span) and capped whole-file text reads. Every input is opened with O_NONBLOCK (a FIFO or a
// device never blocks the open) and must be a regular file; it is remembered by device and inode, so that
// an output that would overwrite it is refused (core/atomic_file.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace kc {

class MappedFile {
 public:
  // Throws kc::Error naming the path when the file cannot be opened or mapped, or is not a regular file.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
};

// Caps of whole-file text reads (docs/architecture.md "Inputs"): configuration (TOML thresholds and
// specs, JSON segment lists, manifests) and data text (corpus prose/code, tokenizer.json, config.json,
// prompts, traces, logits JSON).
inline constexpr std::size_t kConfigTextCap = std::size_t{16} << 20;  // 16 MiB
inline constexpr std::size_t kDataTextCap = std::size_t{1} << 30;     // 1 GiB

// The whole file as text. Refuses (kc::Error "PATH: …") a non-regular file, a file larger than `cap`
// (naming `what`, e.g. "a thresholds file") and read errors.
std::string read_text_file(const std::string& path, std::size_t cap, const char* what);

// Opens an input for reading: O_RDONLY | O_NONBLOCK | O_CLOEXEC, checked to be a regular file (else
// "PATH: expected a regular file, got a FIFO" etc.), noted as an input; returns the fd (O_NONBLOCK is
// cleared) and its size.
int open_input(const std::string& path, std::uint64_t* size);

// The input read by this process that is the file (device, inode, and its status-change time: a deleted
// input whose inode number the file system gave to a new file is not that input), if any.
std::optional<std::string> input_with_inode(std::uint64_t dev, std::uint64_t ino, std::int64_t ctime_ns);
// For a caller that read an old output only to decide whether to redo it (sweep's cache): no longer an input.
void forget_input(const std::string& path);

}  // namespace kc
