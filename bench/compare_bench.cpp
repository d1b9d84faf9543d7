// kc_compare_bench [--log2n 26] [--threads 1,2] [--repeat 3] [--methods mixed,stat_rel_err]
//                  [--files ACTUAL GOLDEN --dtype D]…
// Times `mixed` and `stat_rel_err` on f32 and bf16 pairs (generated in-process, or the .npy pairs given
// with --files; bf16 .npy files need --dtype bfloat16 after them) and a plain read of the same bytes
// (integer sum over both buffers, the memory-bandwidth anchor), for each thread count.
// Prints one JSON object per line: {"dtype","method","threads","seconds" (wall),"cpu_seconds" (process CPU),
// "gbps" (wall),"gbps_per_thread" (bytes per CPU second),"read_gbps_per_thread","ratio_to_read"}; best of
// --repeat runs. Per-thread figures use CPU time, so a loaded machine does not distort the ratio.
#include <fmt/format.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "core/error.h"
#include "core/parallel.h"
#include "io/tensor.h"
#include "numeric/formats.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU seconds of the whole process: on a shared machine wall time mostly measures the other tenants.
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
// Best of several samples, each the mean of back-to-back calls lasting ≥ kMinSample wall seconds.
// Why batches: Linux charges a worker thread still running on another core its CPU time only at its next
// tick or context switch, so the process CPU clock read right after a parallel region can miss up to a tick
// (1–4 ms) per worker, and the best of a few short samples picks exactly such an undercount (seen on a
// 16-core machine: a plain read "at 137 GB/s per thread"). Over ≥ 0.25 s per sample the error is ≤ ~2 %.
struct Timing {
  static constexpr double kMinSample = 0.25;
  double wall = 1e30, cpu = 1e30;
  template <typename F>
  void run(F&& f) {
    const double w0 = now(), c0 = cpu_now();
    int calls = 0;
    do {
      f();
      ++calls;
    } while (now() - w0 < kMinSample);
    wall = std::min(wall, (now() - w0) / calls);
    cpu = std::min(cpu, (cpu_now() - c0) / calls);
  }
};

// Plain read of both buffers: 64-bit integer sum, split in the same fixed chunks as compare().
std::uint64_t read_sum(const kc::Tensor& a, const kc::Tensor& g) {
  struct Acc {
    std::uint64_t s = 0;
    void merge(const Acc& o) { s += o.s; }
  };
  const std::size_t words = a.bytes.size() / 8;
  const std::size_t per = 65536;  // 512 KiB per chunk
  return kc::parallel_reduce<Acc>(words, per, [&](Acc& acc, std::size_t b, std::size_t e) {
           const auto* pa = reinterpret_cast<const std::uint64_t*>(a.bytes.data());
           const auto* pg = reinterpret_cast<const std::uint64_t*>(g.bytes.data());
           std::uint64_t s = 0;
           for (std::size_t i = b; i < e; ++i) s += pa[i] + pg[i];
           acc.s += s;
         }).s;
}

kc::Tensor generate(kc::DType dt, std::size_t n, bool actual) {
  // golden ~ N(0,1); actual = golden · (1 + 1e-4·N(0,1)), encoded in the dtype (deterministic seeds).
  std::mt19937_64 rg(1234), ra(5678);
  std::normal_distribution<float> nd;
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double g = nd(rg);
    v[i] = actual ? g * (1 + 1e-4 * nd(ra)) : g;
  }
  return kc::make_tensor_f64(dt, {static_cast<std::int64_t>(n)}, v, actual ? "<actual>" : "<golden>");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int log2n = 26, repeat = 3;
    std::vector<int> threads = {1, 2};
    std::vector<kc::Method> methods = {kc::Method::mixed, kc::Method::stat_rel_err};
    struct Pair {
      kc::Tensor a, g;
    };
    std::vector<Pair> pairs;
    for (int i = 1; i < argc; ++i) {
      std::string s = argv[i];
      if (s == "--log2n" && i + 1 < argc) log2n = std::atoi(argv[++i]);
      else if (s == "--repeat" && i + 1 < argc) repeat = std::atoi(argv[++i]);
      else if (s == "--methods" && i + 1 < argc) {
        methods.clear();
        std::string t = argv[++i];
        for (std::size_t p = 0; p <= t.size();) {
          const std::size_t q = std::min(t.find(',', p), t.size());
          const auto m = kc::parse_method(t.substr(p, q - p));
          if (!m) kc::fail("--methods: expected method names (mixed, stat_rel_err, …), got {}", t);
          methods.push_back(*m);
          p = q + 1;
        }
      } else if (s == "--threads" && i + 1 < argc) {
        threads.clear();
        std::string t = argv[++i];
        for (std::size_t p = 0; p < t.size();) {
          threads.push_back(std::atoi(t.c_str() + p));
          p = t.find(',', p);
          if (p == std::string::npos) break;
          ++p;
        }
      } else if (s == "--files" && i + 2 < argc) {
        kc::RawLayout raw;
        std::string fa = argv[++i], fg = argv[++i];
        if (i + 2 < argc && std::string(argv[i + 1]) == "--dtype") {
          raw.dtype = kc::parse_dtype(argv[i + 2]);
          i += 2;
        }
        pairs.push_back({kc::load_tensor(fa, raw), kc::load_tensor(fg, raw)});
      } else {
        kc::fail("usage: kc_compare_bench [--log2n N] [--threads 1,2] [--repeat R] [--methods M,…] "
                 "[--files A G [--dtype D]]…; got {}", s);
      }
    }
    if (pairs.empty()) {
      const std::size_t n = std::size_t{1} << log2n;
      for (kc::DType dt : {kc::DType::float32, kc::DType::bfloat16})
        pairs.push_back({generate(dt, n, true), generate(dt, n, false)});
    }
    for (auto& p : pairs) {
      const double bytes = static_cast<double>(p.a.bytes.size() + p.g.bytes.size());
      for (int t : threads) {
        kc::set_thread_count(t);
        Timing rd;
        volatile std::uint64_t sink = 0;
        for (int r = 0; r < repeat; ++r) rd.run([&] { sink = sink + read_sum(p.a, p.g); });
        // Throughput per thread from CPU time (= wall × threads when the machine is idle).
        const double read_gbps_thread = bytes / rd.cpu / 1e9;
        std::printf("{\"dtype\": \"%s\", \"method\": \"read\", \"threads\": %d, \"seconds\": %.6f, "
                    "\"cpu_seconds\": %.6f, \"gbps\": %.3f, \"gbps_per_thread\": %.3f}\n",
                    kc::dtype_name(p.g.dtype), t, rd.wall, rd.cpu, bytes / rd.wall / 1e9, read_gbps_thread);
        for (kc::Method m : methods) {
          kc::Route rt;
          rt.method = m;
          rt.source = "bench";
          Timing tm;
          bool pass = false;
          for (int r = 0; r < repeat; ++r) tm.run([&] { pass = kc::compare({&p.a, &p.g, nullptr}, rt).pass; });
          const double gbps_thread = bytes / tm.cpu / 1e9;
          std::printf("{\"dtype\": \"%s\", \"method\": \"%s\", \"threads\": %d, \"seconds\": %.6f, "
                      "\"cpu_seconds\": %.6f, \"gbps\": %.3f, \"gbps_per_thread\": %.3f, "
                      "\"read_gbps_per_thread\": %.3f, \"ratio_to_read\": %.3f, \"pass\": %s}\n",
                      kc::dtype_name(p.g.dtype), kc::method_name(m), t, tm.wall, tm.cpu, bytes / tm.wall / 1e9,
                      gbps_thread, read_gbps_thread, gbps_thread / read_gbps_thread, pass ? "true" : "false");
          std::fflush(stdout);
        }
      }
    }
    kc::set_thread_count(0);
    return 0;
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "kc_compare_bench: error: %s\n", e.what());
    return 3;
  }
}
