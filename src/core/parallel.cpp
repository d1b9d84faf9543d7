#include "core/parallel.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

namespace kc {
namespace {

std::atomic<int> g_threads{0};

int default_threads() {
  if (const char* s = std::getenv("KC_THREADS")) {
    int n = std::atoi(s);
    if (n > 0) return n;
  }
  unsigned h = std::thread::hardware_concurrency();
  return h ? static_cast<int>(h) : 1;
}

// A fixed pool of workers that pull chunk indices from a shared counter.
class Pool {
 public:
  static Pool& get() {
    static Pool p;
    return p;
  }
  void run(int threads, std::size_t n_chunks, const std::function<void(std::size_t)>& body) {
    std::unique_lock<std::mutex> serial(run_mu_);  // one parallel region at a time
    ensure_workers(threads - 1);
    std::atomic<std::size_t> next{0};
    std::exception_ptr err;
    std::mutex err_mu;
    std::function<void()> work = [&] {
      for (;;) {
        std::size_t c = next.fetch_add(1);
        if (c >= n_chunks) return;
        try {
          body(c);
        } catch (...) {
          std::lock_guard<std::mutex> g(err_mu);
          if (!err) err = std::current_exception();
          next.store(n_chunks);
        }
      }
    };
    int helpers = std::min<int>(threads - 1, static_cast<int>(n_chunks) - 1);
    {
      std::lock_guard<std::mutex> g(mu_);
      job_ = &work;
      active_ = helpers;
      pending_.store(helpers);
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    cv_.notify_all();
    work();
    spin_while([&] { return pending_.load(std::memory_order_acquire) != 0; });
    std::unique_lock<std::mutex> g(mu_);
    done_cv_.wait(g, [&] { return pending_.load() == 0; });
    job_ = nullptr;
    g.unlock();
    if (err) std::rethrow_exception(err);
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

 private:
  // Engine forwards run hundreds of short regions per call (a tiny model's ops take microseconds); a
  // futex sleep and wake-up per region costs as much as the work, so waiters first spin a bounded while
  // (4096 pause instructions: tens to a few hundred µs, by CPU).
  // The condition variables stay the source of truth: the spin only shortens the wait.
  template <class Cond>
  static void spin_while(Cond busy) {
    for (int i = 0; i < 4096 && busy(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      int id = static_cast<int>(workers_.size());
      workers_.emplace_back([this, id] { loop(id); });
    }
  }
  void loop(int id) {
    std::uint64_t seen = 0;
    for (;;) {
      spin_while([&] { return published_.load(std::memory_order_acquire) == seen; });
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return stop_ || (generation_ != seen && id < active_); });
      if (stop_) return;
      seen = generation_;
      auto* job = job_;
      g.unlock();
      (*job)();
      g.lock();
      if (pending_.fetch_sub(1) == 1) done_cv_.notify_one();
    }
  }
  std::mutex run_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void()>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  std::atomic<std::uint64_t> published_{0};  // generation_, readable without the lock (spinning)
  std::atomic<int> pending_{0};
  int active_ = 0;
  bool stop_ = false;
};

thread_local bool t_in_parallel = false;

}  // namespace

int thread_count() {
  int n = g_threads.load();
  return n > 0 ? n : default_threads();
}

void set_thread_count(int n) { g_threads.store(n > 0 ? n : 0); }

void parallel_for(std::size_t n, std::size_t chunk,
                  const std::function<void(std::size_t, std::size_t, std::size_t)>& fn) {
  if (n == 0) return;
  if (chunk == 0) chunk = 1;
  std::size_t n_chunks = chunk_count(n, chunk);
  auto body = [&](std::size_t c) {
    std::size_t b = c * chunk;
    fn(c, b, std::min(n, b + chunk));
  };
  int threads = thread_count();
  // Nested regions and tiny jobs run inline: same chunks, same order of merge, same result.
  if (threads <= 1 || n_chunks == 1 || t_in_parallel) {
    for (std::size_t c = 0; c < n_chunks; ++c) body(c);
    return;
  }
  Pool::get().run(threads, n_chunks, [&](std::size_t c) {
    bool prev = t_in_parallel;
    t_in_parallel = true;
    try {
      body(c);
    } catch (...) {
      t_in_parallel = prev;
      throw;
    }
    t_in_parallel = prev;
  });
}

}  // namespace kc
