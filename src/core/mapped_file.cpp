#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"

namespace kc {
namespace {

std::mutex g_inputs_mu;
struct Input {
  std::string path;
  std::int64_t ctime_ns;
};
std::atomic<bool> g_guard{false};
std::map<std::pair<std::uint64_t, std::uint64_t>, Input>& inputs() {
  static std::map<std::pair<std::uint64_t, std::uint64_t>, Input> m;
  return m;
}

std::int64_t ctime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

int open_input(const std::string& path, std::uint64_t* size) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise block forever before the type check.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw_input_error(path, "open", "a readable file", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw_input_error(path, "stat", "a readable file", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: file type: expected a regular file, got {}", path, kind_of(st.st_mode));
  }
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (size) *size = static_cast<std::uint64_t>(st.st_size);
  // Every input, mapped or read as text (a thresholds TOML, a spec, a segments list), is remembered here:
  // the one place an output is checked against (core/atomic_file.h).
  if (g_guard) {
    std::lock_guard<std::mutex> lock(g_inputs_mu);
    inputs()[{st.st_dev, st.st_ino}] = Input{path, ctime_ns(st)};
  }
  return fd;
}

std::optional<std::string> input_with_inode(std::uint64_t dev, std::uint64_t ino, std::int64_t ctime) {
  std::lock_guard<std::mutex> lock(g_inputs_mu);
  auto it = inputs().find({dev, ino});
  if (it == inputs().end() || it->second.ctime_ns != ctime) return std::nullopt;
  return it->second.path;
}

void forget_input(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  std::lock_guard<std::mutex> lock(g_inputs_mu);
  inputs().erase({st.st_dev, st.st_ino});
}

void set_input_guard(bool on) { g_guard = on; }

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  std::uint64_t size = 0;
  int fd = open_input(path, &size);
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<std::size_t>(size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw_input_error(path, "map", fmt::format("{} bytes mapped into memory", m->size_), std::strerror(errno));
    }
    m->data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
  return m;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

std::string read_text_file(const std::string& path, std::size_t cap, const char* what) {
  std::uint64_t size = 0;
  int fd = open_input(path, &size);
  if (size > cap) {
    ::close(fd);
    fail("{}: size: expected at most {} MiB ({}), got {} bytes", path, cap >> 20, what, size);
  }
  std::string out(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  // Reads until EOF and at most cap + 1 bytes: a file that grows while read is still bounded.
  while (true) {
    if (done == out.size()) {
      if (out.size() > cap) break;
      out.resize(std::min(cap + 1, out.size() + 65536));
    }
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      throw_input_error(path, "read", "a readable file", std::strerror(e));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (done > cap) fail("{}: size: expected at most {} MiB ({}), got more", path, cap >> 20, what);
  out.resize(done);
  return out;
}

}  // namespace kc
