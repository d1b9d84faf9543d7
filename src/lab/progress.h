// Progress of a long loop on stderr (record, locate): a bar with the ETA on a terminal, else one line per step,
// so a user watching a log sees the run move and how long it has left.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "core/text_safe.h"

namespace kc {

class Progress {
 public:
  // `what` names a step ("segment"), `steps` how many there are, `total` the work in `unit`s ("positions").
  Progress(std::string what, std::size_t steps, std::int64_t total, std::string unit = "positions")
      : what_(std::move(what)), unit_(std::move(unit)), steps_(steps), total_(total), tty_(isatty(2)),
        t0_(std::chrono::steady_clock::now()) {}
  // One more step done: `work` units, `reused` when they came from a checkpoint (the ETA extrapolates from
  // computed work only); `note` is printed after the step (e.g. which run).
  void done(std::int64_t work, bool reused = false, std::string_view note = "") {
    ++count_, done_ += work;
    if (!reused) computed_ += work;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double eta = computed_ > 0 ? el / static_cast<double>(computed_) * static_cast<double>(total_ - done_) : 0;
    const std::string n = terminal_safe(note);
    if (tty_) {
      const int w = 30, f = static_cast<int>(w * done_ / std::max<std::int64_t>(total_, 1));
      std::fprintf(stderr, "\r[%s%s] %zu/%zu %ss%s, %lld/%lld %s, %.0f s, ETA %.0f s   ",
                   std::string(static_cast<std::size_t>(f), '#').c_str(),
                   std::string(static_cast<std::size_t>(w - f), '.').c_str(), count_, steps_, what_.c_str(),
                   n.c_str(), static_cast<long long>(done_), static_cast<long long>(total_), unit_.c_str(), el, eta);
      if (count_ == steps_) std::fputc('\n', stderr);
    } else {
      std::fprintf(stderr, "%s %zu/%zu %s%s: %lld/%lld %s, %.1f s, ETA %.0f s\n", what_.c_str(), count_, steps_,
                   reused ? "(checkpoint)" : "done", n.c_str(), static_cast<long long>(done_),
                   static_cast<long long>(total_), unit_.c_str(), el, eta);
    }
    std::fflush(stderr);
  }

 private:
  std::string what_, unit_;
  std::size_t steps_, count_ = 0;
  std::int64_t total_, done_ = 0, computed_ = 0;
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace kc
