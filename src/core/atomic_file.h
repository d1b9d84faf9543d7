// Files we write appear whole or not at all: write to a temporary file in the target's folder
// ("PATH.tmp.PID", created with O_EXCL | O_NOFOLLOW: a planted file or symlink is never followed), fsync,
// rename over PATH. Before writing, the target is checked: an existing PATH that is one of this process's
// inputs (same device and inode, core/mapped_file.h) is refused, and so is one that is not a regular file
// (a device, FIFO, directory) unless special outputs are allowed (`--write-special`): then the bytes are
// written straight to it, without a rename (the input check needs set_input_guard(true), as the CLI does). Temporaries left by dead processes (kill -9) next to PATH are
// removed.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kc {

// `kerncheck --write-special`: write to an existing non-regular output (e.g. /dev/stdout) in place.
void set_special_outputs_allowed(bool allowed);
// The CLI turns this on (main.cpp): from then on every file MappedFile maps is an input that no output may
// overwrite. Off by default, so that a library caller (tests, the Python module) may rewrite a file it read.
void set_input_guard(bool on);  // defined in mapped_file.cpp

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // checks the target, opens the temporary file; throws kc::Error
  ~AtomicFile();                          // removes the temporary file unless commit() ran
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const std::uint8_t> bytes);
  void write(std::string_view text) {
    write({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
  }
  void commit();  // flush, fsync, rename

 private:
  std::string path_, tmp_;  // tmp_ empty: writing straight to a special file
  int fd_ = -1;
};

// One-shot helper for small outputs (reports).
void write_file_atomic(const std::string& path, std::string_view text);

// Throws unless `path` may be written (not an input, a regular file or absent, or special outputs
// allowed): for writers that check before a long computation.
void check_output_path(const std::string& path);

// A command's promise, checked before it reads or computes anything: none of `outputs` is the same file
// (device and inode, so also through a hard link or symlink) as any of `inputs`, whether or not the command
// will read that input on this path through it (`test --thresholds T --partial T` reads no thresholds, and
// must not replace them either). Empty paths are skipped. Throws kc::Error naming both.
void check_outputs_apart(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs);

}  // namespace kc
