#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"

namespace kc {
namespace {

std::atomic<bool> g_special{false};

bool under(const std::string& path, const char* dir) {
  return path.compare(0, std::strlen(dir), dir) == 0;
}

[[noreturn]] void refuse_input_as_output(const std::string& path, const std::string& input) {
  fail("{}: output: expected a path that is not one of the inputs, got the same file as the input {} "
       "(refusing to overwrite it)",
       path, input);
}

// true: the target exists and is a special file that we may write in place.
bool check_target(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;  // absent (or a dangling link: rename replaces it)
  if (auto in = input_with_inode(st.st_dev, st.st_ino,
                                 static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec))
    refuse_input_as_output(path, *in);
  // /dev/stdout and /proc/self/fd/N resolve to whatever the descriptor is (a file, a pipe): never
  // replace them by a rename.
  if (S_ISREG(st.st_mode) && !under(path, "/dev/") && !under(path, "/proc/")) return false;
  if (S_ISDIR(st.st_mode)) fail("{}: output: expected a file path, got a directory", path);
  if (!g_special)
    fail("{}: output: expected a regular file or a new path, got a device, FIFO or socket (pass "
         "--write-special to write to it in place)",
         path);
  return true;
}

// Removes "BASE.tmp.PID[.N]" next to `path` whose process is gone (kill -9 leaves them behind).
void remove_stale_temporaries(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const char* p = name.c_str() + prefix.size();
    char* end = nullptr;
    const long pid = std::strtol(p, &end, 10);
    if (end == p || pid <= 0 || (*end != '\0' && *end != '.')) continue;
    if (*end == '.') {
      const char* q = end + 1;
      std::strtol(q, &end, 10);
      if (end == q || *end != '\0') continue;
    }
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    const std::string full = dir + "/" + name;
    struct stat st {};
    if (::lstat(full.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
        st.st_uid == ::getuid())
      (void)::unlink(full.c_str());
  }
  ::closedir(d);
}

}  // namespace

void set_special_outputs_allowed(bool allowed) { g_special = allowed; }

void check_output_path(const std::string& path) { (void)check_target(path); }

void check_outputs_apart(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  for (const std::string& out : outputs) {
    struct stat so {};
    if (out.empty() || ::stat(out.c_str(), &so) != 0) continue;  // a new file cannot be an input
    for (const std::string& in : inputs) {
      struct stat si {};
      if (!in.empty() && ::stat(in.c_str(), &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        refuse_input_as_output(out, in);
    }
  }
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // Through a symlink: replace its target (in the target's folder), not the link.
  struct stat lst {};
  if (::lstat(path_.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) && !under(path_, "/dev/") &&
      !under(path_, "/proc/")) {
    if (char* real = ::realpath(path_.c_str(), nullptr)) {
      path_ = real;
      std::free(real);
    }
  }
  if (check_target(path_)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw_input_error(path_, "open for writing", "a writable file", std::strerror(errno));
    return;
  }
  remove_stale_temporaries(path_);
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp_ = attempt == 0 ? fmt::format("{}.tmp.{}", path_, ::getpid())
                        : fmt::format("{}.tmp.{}.{}", path_, ::getpid(), attempt);
    // O_EXCL | O_NOFOLLOW: a file or symlink planted at the name is never opened, let alone followed.
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ >= 0) return;
    if (errno != EEXIST && errno != ELOOP) break;
  }
  throw_input_error(path_, "temporary file", fmt::format("a new file {} in a writable folder", tmp_),
                    std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(std::span<const std::uint8_t> bytes) {
  KC_ASSERT(fd_ >= 0, "write after commit to {}", path_);
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_input_error(path_, "write", "a writable file with room", std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  KC_ASSERT(fd_ >= 0, "double commit of {}", path_);
  if (tmp_.empty()) {  // a special file written in place: nothing to rename
    ::close(fd_);
    fd_ = -1;
    return;
  }
  if (::fsync(fd_) != 0) throw_input_error(path_, "fsync", "a writable file with room", std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_.c_str());
    throw_input_error(path_, "rename into place", "a writable folder", std::strerror(e));
  }
}

void write_file_atomic(const std::string& path, std::string_view text) {
  AtomicFile f(path);
  f.write(text);
  f.commit();
}

}  // namespace kc
