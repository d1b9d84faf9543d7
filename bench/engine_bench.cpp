// kc_engine_bench: speed of the f32 Llama engine (driven by bench/engine_bench.py, which runs transformers
// beside it). Prints one JSON object per command on stdout.
//   kc_engine_bench sgemm N                       machine rate: one cblas_sgemm N×N×N with OpenBLAS on
//                                                 kc::thread_count() threads, our fixed-tile gemm_nt and
//                                                 the packed GEMM of the Llama engine (packed_gemm)
//   kc_engine_bench model MODEL PREFILL DECODE [f32|bf16]   prefill PREFILL tokens, then DECODE decode steps
//                                                 (quantized GEMVs where the GGUF allows; f32: the f32 ones;
//                                                 bf16: weights rounded to bf16, held as bf16 panels)
//   kc_engine_bench memory MODEL T                one T-token prefill, logits discarded; reports maxrss
//   kc_engine_bench profile MODEL T               one T-token prefill timed per op (wall and process CPU
//                                                 seconds between the named-tensor hook events)
//   kc_engine_bench bandwidth MB                  read bandwidth: a sum over an MB-megabyte buffer on
//                                                 kc::thread_count() threads, best of 5 (GB/s)
//   kc_engine_bench record-work MODEL CORPUS [BATCH]   the work of `kerncheck record --model MODEL --corpus
//                                                 CORPUS`: prefill and decode flops, and the bytes its decode
//                                                 steps read (weights once per step, each sequence's KV
//                                                 cache) one segment at a time and in record's batches
#include <cblas.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "golden/corpus.h"
#include "lab/record_model.h"
#include "model/llama.h"
#include "ops/engine_ops.h"
#include "ops/packed_gemm.h"

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Peak RSS of this process image: VmHWM from /proc/self/status. getrusage's ru_maxrss is not used: Linux
// carries it across exec, so a child of the Python driver (torch and transformers loaded, ~1.6 GB)
// reported the driver's peak instead of its own.
double maxrss_mb() {
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    double kb = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
    std::fclose(f);
    if (kb >= 0) return kb / 1024.0;
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// Best of `reps` runs of fn (seconds).
template <typename Fn>
double best_of(int reps, Fn&& fn) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto t = clock_type::now();
    fn();
    best = std::min(best, seconds_since(t));
  }
  return best;
}

int bench_sgemm(std::size_t n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (auto& x : a) x = d(rng);
  for (auto& x : b) x = d(rng);
  const double flops = 2.0 * n * n * n;
  openblas_set_num_threads(kc::thread_count());
  const double t_blas = best_of(5, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
  });
  openblas_set_num_threads(1);
  const double t_ours = best_of(5, [&] { kc::engine::gemm_nt(a.data(), n, n, b.data(), n, c.data()); });
  const kc::engine::PackedMatrix pb(b.data(), n, n);  // the Llama engine's GEMM (weights packed at load)
  const double t_packed = best_of(5, [&] { kc::engine::packed_gemm(a.data(), n, pb, c.data()); });
  std::printf(
      "{\"n\": %zu, \"threads\": %d, \"openblas_gflops\": %.2f, \"gemm_nt_gflops\": %.2f, "
      "\"packed_gflops\": %.2f}\n",
      n, kc::thread_count(), flops / t_blas * 1e-9, flops / t_ours * 1e-9, flops / t_packed * 1e-9);
  return 0;
}

std::vector<std::int32_t> bench_tokens(std::size_t n, std::size_t vocab) {
  std::vector<std::int32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>((i * 7919 + 101) % vocab);
  return ids;
}

// Useful f32 flops of a T-token prefill: the GEMMs (2·weights·T) and causal attention (q·k and p·v over
// the t+1 visible keys of each query).
double prefill_flops(const kc::LlamaConfig& c, std::size_t T) {
  const double D = c.d_model, F = c.d_ff, qs = c.n_heads * c.head_dim, kvs = c.n_kv_heads * c.head_dim;
  const double per_layer = D * qs + 2 * D * kvs + qs * D + 3 * D * F;
  const double gemm = 2.0 * T * (c.n_layers * per_layer + c.n_vocab * D);
  const double pairs = static_cast<double>(T) * (T + 1) / 2;
  const double attn = 4.0 * pairs * c.head_dim * c.n_heads * c.n_layers;
  return gemm + attn;
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// weights "f32": drop the quantized decode path (as the lab's for_each_weight does), for an A/B of the GEMVs;
// "bf16": also round every weight to bf16, as the lab's bf16 base does (the packed matrices are then held as
// bf16 panels: half the bytes a decode step reads); "": the GGUF as loaded.
int bench_model(const std::string& path, std::size_t n_prefill, std::size_t n_decode, const std::string& weights) {
  auto t = clock_type::now();
  auto model = kc::LlamaModel::load(path);
  const double t_load = seconds_since(t);
  if (weights == "f32") model.for_each_weight([](const std::string&, std::span<float>) {});
  if (weights == "bf16")
    model.for_each_weight([](const std::string&, std::span<float> w) {
      for (float& v : w) {  // round to nearest even bf16 (finite weights)
        std::uint32_t u;
        std::memcpy(&u, &v, 4);
        u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
        std::memcpy(&v, &u, 4);
      }
    });
  const auto ids = bench_tokens(n_prefill + n_decode, model.config().n_vocab);
  // A sink that takes the logits: an empty one would skip the LM head, which prefill_flops counts.
  const kc::LogitsSink take = [](std::size_t, std::size_t, std::span<const float>) {};
  // Steady state, as when recording a corpus segment after segment: the warm-up prefills the whole prompt
  // (first touch of the weights, the BLAS buffers and the model's kept work buffers); best of 3 timed runs.
  // The transformers side (engine_bench.py) is warmed and timed the same way.
  kc::LlamaState warm(model.config());
  model.prefill(warm, std::span(ids).first(n_prefill), take);
  double t_prefill = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    kc::LlamaState s(model.config());
    t = clock_type::now();
    model.prefill(s, std::span(ids).first(n_prefill), take);
    t_prefill = std::min(t_prefill, seconds_since(t));
  }
  kc::LlamaState st(model.config());
  model.prefill(st, std::span(ids).first(n_prefill), take);
  t = clock_type::now();
  const double c0 = cpu_seconds();
  for (std::size_t i = 0; i < n_decode; ++i) model.decode(st, ids[n_prefill + i]);
  const double t_decode = seconds_since(t), cpu_decode = cpu_seconds() - c0;
  std::printf(
      "{\"threads\": %d, \"load_s\": %.3f, \"prefill_tokens\": %zu, \"prefill_s\": %.4f, \"prefill_tok_s\": "
      "%.2f, "
      "\"prefill_gflops\": %.2f, \"decode_steps\": %zu, \"decode_s\": %.4f, \"decode_tok_s\": %.2f, "
      "\"decode_cpu_ms_per_token\": %.2f, \"decode_weights\": \"%s\", \"maxrss_mb\": %.1f}\n",
      kc::thread_count(), t_load, n_prefill, t_prefill, n_prefill / t_prefill,
      prefill_flops(model.config(), n_prefill) / t_prefill * 1e-9, n_decode, t_decode, n_decode / t_decode,
      cpu_decode / n_decode * 1e3,
      weights == "bf16" ? "bf16 panels" : model.quantized() ? "quantized" : "f32", maxrss_mb());
  return 0;
}

// Where a prefill's time goes: the time between consecutive hook events on the calling thread is charged
// to the later event's name (docs/engine.md lists what runs before each: "attn.q" = the Q/K/V GEMMs and
// RoPE, "attn.ctx" = attention, "mlp.norm" = residual add + RMSNorm, "logits" = the LM head, …). Process
// CPU time (all threads) is robust against other load on the machine; wall time is not.
int bench_profile(const std::string& path, std::size_t T) {
  auto model = kc::LlamaModel::load(path);
  const auto ids = bench_tokens(T, model.config().n_vocab);
  kc::LlamaState warm(model.config());
  model.prefill(warm, std::span(ids).first(16));
  struct Acc {
    double wall = 0, cpu = 0;
  };
  std::map<std::string, Acc> acc;
  auto last_wall = clock_type::now();
  double last_cpu = cpu_seconds();
  model.set_hook([&](const kc::engine::TensorEvent& e) {
    if (e.head >= 0) return;  // "attn.p" comes from worker threads
    const auto now = clock_type::now();
    const double c = cpu_seconds();
    auto& a = acc[std::string(e.name)];
    a.wall += std::chrono::duration<double>(now - last_wall).count();
    a.cpu += c - last_cpu;
    last_wall = now, last_cpu = c;
  });
  kc::LlamaState st(model.config());
  const auto t0 = clock_type::now();
  const double c0 = cpu_seconds();
  model.prefill(st, ids, [&](std::size_t, std::size_t, std::span<const float>) {
    const auto now = clock_type::now();
    const double c = cpu_seconds();
    auto& a = acc["(sink)"];
    a.wall += std::chrono::duration<double>(now - last_wall).count();
    a.cpu += c - last_cpu;
    last_wall = now, last_cpu = c;
  });
  const double wall = seconds_since(t0), cpu = cpu_seconds() - c0;
  std::printf("{\"tokens\": %zu, \"threads\": %d, \"wall_s\": %.4f, \"cpu_s\": %.4f, \"ops\": {", T,
              kc::thread_count(), wall, cpu);
  const char* sep = "";
  for (const auto& [name, a] : acc) {
    std::printf("%s\"%s\": [%.4f, %.4f]", sep, name.c_str(), a.wall, a.cpu);
    sep = ", ";
  }
  std::printf("}}\n");
  return 0;
}

int bench_memory(const std::string& path, std::size_t T) {
  const auto model = kc::LlamaModel::load(path);
  const double after_load = maxrss_mb();
  const auto ids = bench_tokens(T, model.config().n_vocab);
  kc::LlamaState st(model.config());
  float last = 0;
  const auto t = clock_type::now();
  model.prefill(st, ids, [&](std::size_t, std::size_t, std::span<const float> l) { last = l.back(); });
  std::printf(
      "{\"tokens\": %zu, \"prefill_s\": %.2f, \"maxrss_after_load_mb\": %.1f, \"maxrss_mb\": %.1f, "
      "\"last_logit\": %.4f}\n",
      T, seconds_since(t), after_load, maxrss_mb(), last);
  return 0;
}

int bench_bandwidth(std::size_t mb) {
  std::vector<float> buf(mb * (1u << 20) / sizeof(float));
  kc::parallel_for(buf.size(), 1u << 16, [&](std::size_t, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) buf[i] = static_cast<float>(i & 1023);
  });
  std::vector<double> part(kc::chunk_count(buf.size(), 1u << 20));
  const double t = best_of(5, [&] {
    kc::parallel_for(buf.size(), 1u << 20, [&](std::size_t c, std::size_t b, std::size_t e) {
      float acc[16] = {};
      for (std::size_t i = b; i + 16 <= e; i += 16)
        for (int l = 0; l < 16; ++l) acc[l] += buf[i + l];
      double s = 0;
      for (float a : acc) s += a;
      part[c] = s;
    });
  });
  double sum = 0;
  for (double p : part) sum += p;
  std::printf("{\"mb\": %zu, \"threads\": %d, \"read_gb_s\": %.2f, \"checksum\": %.0f}\n", mb,
              kc::thread_count(), static_cast<double>(buf.size() * sizeof(float)) / t * 1e-9, sum);
  return 0;
}

// The work of recording a corpus with the engine (the bound of bench/record_bench.py): per segment one prefill
// of depth − decode_last tokens and decode_last one-token steps; decode steps batched as `record --model`
// batches segments (kDefaultBatchSegments, kBatchPositions; BATCH overrides the first). A step reads every
// weight once (f32, or the GGUF's blocks where the model decodes from them) plus each live sequence's K and V.
int bench_record_work(const std::string& model_path, const std::string& corpus_path, int batch) {
  const auto model = kc::LlamaModel::load(model_path);
  const kc::Corpus corpus = kc::read_corpus(corpus_path);
  const auto& c = model.config();
  const double D = c.d_model, F = c.d_ff, qs = c.n_heads * c.head_dim, kvs = c.n_kv_heads * c.head_dim;
  const double weights = c.n_layers * (D * qs + 2 * D * kvs + qs * D + 3 * D * F) + c.n_vocab * D;
  double quant_bytes = 0;
  if (const auto* q = model.quantized()) {
    for (const auto& l : q->layers)
      for (const auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
        quant_bytes += m->data ? static_cast<double>(m->rows) * m->row_bytes : 4.0 * m->rows * m->cols;
    quant_bytes += q->lm_head.data ? static_cast<double>(q->lm_head.rows) * q->lm_head.row_bytes
                                   : 4.0 * c.n_vocab * D;
  }
  // One decode step at position t (t + 1 keys): its flops and the KV bytes it reads.
  auto step_flops = [&](double t) { return 2 * weights + 4.0 * (t + 1) * c.head_dim * c.n_heads * c.n_layers; };
  auto step_kv_bytes = [&](double t) { return 2.0 * (t + 1) * kvs * 4 * c.n_layers; };
  double prefill = 0, decode = 0, kv = 0, positions = 0, decode_positions = 0, batched_steps = 0;
  const std::size_t most = static_cast<std::size_t>(batch > 0 ? batch : kc::kDefaultBatchSegments);
  std::size_t in_batch = 0;
  std::int64_t batch_positions = 0, batch_steps = 0;
  for (const auto& s : corpus.segments) {
    const std::int64_t n_prefill = s.depth - s.decode_last;
    prefill += prefill_flops(c, static_cast<std::size_t>(n_prefill));
    for (std::int64_t t = n_prefill; t < s.depth; ++t) decode += step_flops(t), kv += step_kv_bytes(t);
    positions += s.depth, decode_positions += s.decode_last;
    if (in_batch == most || batch_positions + s.depth > kc::kBatchPositions)  // record's next batch
      batched_steps += batch_steps, in_batch = 0, batch_positions = 0, batch_steps = 0;
    ++in_batch, batch_positions += s.depth, batch_steps = std::max(batch_steps, s.decode_last);
  }
  batched_steps += batch_steps;
  std::printf(
      "{\"segments\": %zu, \"positions\": %.0f, \"decode_positions\": %.0f, \"prefill_flops\": %.6g, "
      "\"decode_flops\": %.6g, \"decode_steps_batch1\": %.0f, \"decode_steps_batched\": %.0f, "
      "\"f32_weight_bytes\": %.6g, \"quant_weight_bytes\": %.6g, \"decode_kv_bytes\": %.6g}\n",
      corpus.segments.size(), positions, decode_positions, prefill, decode, decode_positions, batched_steps,
      4 * weights, quant_bytes, kv);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "sgemm" && argc == 3) return bench_sgemm(std::stoul(argv[2]));
    if (cmd == "model" && (argc == 5 || (argc == 6 && (std::string(argv[5]) == "f32" || std::string(argv[5]) == "bf16"))))
      return bench_model(argv[2], std::stoul(argv[3]), std::stoul(argv[4]), argc == 6 ? argv[5] : "");
    if (cmd == "memory" && argc == 4) return bench_memory(argv[2], std::stoul(argv[3]));
    if (cmd == "profile" && argc == 4) return bench_profile(argv[2], std::stoul(argv[3]));
    if (cmd == "bandwidth" && argc == 3) return bench_bandwidth(std::stoul(argv[2]));
    if (cmd == "record-work" && (argc == 4 || argc == 5))
      return bench_record_work(argv[2], argv[3], argc == 5 ? std::stoi(argv[4]) : 0);
    std::fprintf(stderr,
                 "usage: kc_engine_bench sgemm N | model MODEL PREFILL DECODE [f32|bf16] | memory MODEL T | "
                 "profile MODEL T | bandwidth MB | record-work MODEL CORPUS [BATCH]\n");
    return 2;
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "kc_engine_bench: error: %s\n", e.what());
    return kc::kExitBadInput;
  }
}
