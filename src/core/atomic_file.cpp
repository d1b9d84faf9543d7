#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace kc {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_ = fmt::format("{}.tmp.{}", path_, ::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot create: {}", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(std::span<const std::uint8_t> bytes) {
  KC_ASSERT(fd_ >= 0, "write after commit to {}", path_);
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed: {}", path_, std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  KC_ASSERT(fd_ >= 0, "double commit of {}", path_);
  if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", path_, std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_.c_str());
    fail("{}: cannot rename into place: {}", path_, std::strerror(e));
  }
}

void write_file_atomic(const std::string& path, std::string_view text) {
  AtomicFile f(path);
  f.write(text);
  f.commit();
}

}  // namespace kc
