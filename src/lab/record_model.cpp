#include "lab/record_model.h"
#include "lab/progress.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/mapped_file.h"
#include "core/text_safe.h"
#include "golden/corpus.h"
#include "golden/golden.h"
#include "golden/record_logits.h"
#include "golden/record_topk.h"
#include "model/variant.h"
#include "io/safetensors.h"
#include "model/gguf.h"
#include "model/causal_lm.h"

namespace kc {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kPrefillBlockKey = "kerncheck.prefill_block";
constexpr const char* kReferenceKey = "kerncheck.golden_reference";
// The engine named in a file's provenance: the Llama family (llama.h) or the Gated DeltaNet hybrids
// (hybrid.h) — two implementations, so a golden says which one computed it.
std::string engine_name(const CausalLM& m) {
  const std::string a = m.architecture();
  return a == "qwen3_5" || a == "qwen3_next" ? "kerncheck-hybrid-f32" : "kerncheck-llama-f32";
}

bool is_gguf(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return false;  // a checkpoint folder
  auto m = MappedFile::open(path);  // non-blocking open, regular files only
  return m->bytes().size() >= 4 && std::memcmp(m->bytes().data(), "GGUF", 4) == 0;
}

void hash_file(Xxh64& h, const std::string& path) {
  auto m = MappedFile::open(path);
  std::uint64_t size = m->bytes().size();
  h.update({reinterpret_cast<const std::uint8_t*>(&size), sizeof size});
  h.update(m->bytes());
}

}  // namespace

bool is_gguf_model(const std::string& path) { return is_gguf(path); }

std::string tokenizer_source(const std::string& model, const std::string& tokenizer) {
  if (!tokenizer.empty()) return tokenizer;
  std::error_code ec;
  if (is_gguf(model) || fs::exists(fs::path(model) / "tokenizer.json", ec)) return model;
  throw_input_error(model, "tokenizer",
                    "a GGUF with tokenizer metadata or a checkpoint folder with tokenizer.json (or --tokenizer FILE)",
                    "none found");
}

std::string model_identity(const std::string& path) {
  Xxh64 h;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<std::string> files;
    for (auto& e : fs::directory_iterator(path, ec)) {
      auto n = e.path().filename().string();
      if (e.is_regular_file() && (n == "config.json" || e.path().extension() == ".safetensors"))
        files.push_back(n);
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) throw_input_error(path, "model", "config.json and *.safetensors", "none");
    for (auto& f : files) {
      h.update({reinterpret_cast<const std::uint8_t*>(f.data()), f.size() + 1});
      hash_file(h, (fs::path(path) / f).string());
    }
  } else {
    hash_file(h, path);
  }
  return "model-xxh3:" + h.hex();
}

namespace {

using Job = SegmentReplay;  // one segment to run (record_model.h)

struct Loaded {
  std::unique_ptr<CausalLM> model;
  std::string identity, tokenizer_identity;
  std::string variant;                  // canonical
  std::shared_ptr<VariantUsage> usage;  // checked after the first computed segment
};

Loaded load_model(const RecordModelOptions& o) {
  const Variant variant = parse_variant(o.variant, "--variant");  // bad syntax fails before the slow load
  if (o.prefill_block < 0) fail("--prefill-block: expected 0 (one call) or a block size ≥ 1, got {}", o.prefill_block);
  if (o.batch < 0) fail("--batch: expected 0 (the default) or a number of segments ≥ 1, got {}", o.batch);
  const std::string tok_src = tokenizer_source(o.model, o.tokenizer);
  Tokenizer tok = load_tokenizer(tok_src);
  Loaded L;
  L.model = load_causal_lm(o.model);
  L.identity = model_identity(o.model);
  L.tokenizer_identity = tokenizer_identity(tok);
  check_vocab_size(tok, L.model->vocab_size(), o.model, !is_gguf(o.model));
  L.variant = to_string(variant);
  L.usage = apply_variant(*L.model, variant);
  return L;
}

std::int64_t stop_after() {
  const char* s = std::getenv("KC_RECORD_STOP_AFTER");
  return s && *s ? std::atoll(s) : -1;
}

[[noreturn]] void interrupted(const std::string& out, std::int64_t n) {
  fail("interrupted after {} segment(s) (KC_RECORD_STOP_AFTER); rerun the same command to resume from "
       "{}.partial/",
       n, out);
}

using RowsFn = std::function<void(std::size_t job, std::int64_t pos0, std::int64_t rows, std::span<const float>)>;

// Runs the engine over a batch of jobs; rows(i, pos0, n, logits) gets batch[i]'s rows at segment-local
// positions. Each job's prompt is one prefill (prefill_block > 0: calls of that many tokens, state stored
// between calls); then the decode steps of all jobs run together, one decode_batch per step (GEMMs of one
// row per sequence instead of a GEMV per token: the weights are read once per step, not once per token).
// Every row is bitwise what a batch of one gives (CausalLM::decode_batch), so a file does not depend on the
// batch size. Decode rows go to `rows` up to 16 at a time per job, for the (parallel) scoring.
void run_batch(const CausalLM& m, std::span<const Job* const> batch, int prefill_block, const RowsFn& rows) {
  std::vector<std::unique_ptr<SequenceState>> states;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Job& j = *batch[i];
    states.push_back(m.new_state());
    const auto prompt = std::span<const std::int32_t>(j.window).first(j.n_prefill);
    const std::size_t block = prefill_block > 0 ? static_cast<std::size_t>(prefill_block) : prompt.size();
    for (std::size_t b = 0; b < prompt.size(); b += block)
      m.prefill(*states[i], prompt.subspan(b, std::min(block, prompt.size() - b)),
                [&](std::size_t pos0, std::size_t r, std::span<const float> lg) {
                  rows(i, static_cast<std::int64_t>(pos0), static_cast<std::int64_t>(r), lg);
                });
  }
  constexpr std::int64_t kFlushRows = 16;
  const std::size_t V = m.vocab_size();
  std::vector<std::vector<float>> buf(batch.size());
  std::vector<SequenceState*> live;
  std::vector<std::size_t> who;
  std::vector<std::int32_t> tokens;
  for (std::int64_t step = 0;; ++step) {
    live.clear(), who.clear(), tokens.clear();
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i]->n_prefill + step < batch[i]->depth) {
        live.push_back(states[i].get()), who.push_back(i);
        tokens.push_back(batch[i]->window[static_cast<std::size_t>(batch[i]->n_prefill + step)]);
      }
    if (live.empty()) break;
    const std::vector<float> lg = m.decode_batch(live, tokens);  // [live, V]
    for (std::size_t r = 0; r < who.size(); ++r) {
      const Job& j = *batch[who[r]];
      auto& bf = buf[who[r]];
      bf.insert(bf.end(), lg.begin() + r * V, lg.begin() + (r + 1) * V);
      const std::int64_t p = j.n_prefill + step, n = static_cast<std::int64_t>(bf.size() / V);
      if (n == kFlushRows || p + 1 == j.depth) {
        rows(who[r], p + 1 - n, n, bf);
        bf.clear();
      }
    }
  }
}

// Runs every job that `reuse` did not fill from a checkpoint, in batches of up to `batch` segments
// (0: kDefaultBatchSegments) and kBatchPositions positions (run_batch; one segment always fits), and hands
// each finished job to `done` (which checkpoints it), in order.
void run_jobs(const CausalLM& m, const std::vector<Job>& jobs, int prefill_block, int batch, const std::string& out,
              const std::function<bool(const Job&)>& reuse, const RowsFn& rows,
              const std::function<void(const Job&)>& done, Progress& prog) {
  const std::int64_t stop = stop_after();
  std::int64_t computed = 0;
  std::vector<const Job*> todo;
  for (const Job& j : jobs)
    if (reuse(j))
      prog.done(j.depth, true);
    else
      todo.push_back(&j);
  for (std::size_t b = 0; b < todo.size();) {
    if (stop >= 0 && computed >= stop) interrupted(out, computed);
    std::size_t e = b + 1;
    std::int64_t positions = todo[b]->depth;
    const std::size_t most = static_cast<std::size_t>(batch > 0 ? batch : kDefaultBatchSegments);
    while (e < todo.size() && e - b < most && positions + todo[e]->depth <= kBatchPositions &&
           (stop < 0 || computed + static_cast<std::int64_t>(e - b) < stop))
      positions += todo[e++]->depth;
    const std::span<const Job* const> batch(todo.data() + b, e - b);
    run_batch(m, batch, prefill_block,
              [&](std::size_t i, std::int64_t p0, std::int64_t r, std::span<const float> lg) {
                rows(static_cast<std::size_t>(batch[i] - jobs.data()), p0, r, lg);
              });
    for (const Job* j : batch) {
      done(*j);
      ++computed;
      prog.done(j->depth);
    }
    b = e;
  }
}

Logits wrap_logits(std::span<const float> lg, std::int64_t rows, std::int64_t vocab, const std::string& where) {
  Logits L;
  L.t.dtype = DType::float32;
  L.t.shape = {rows, vocab};
  L.t.bytes = {reinterpret_cast<const std::uint8_t*>(lg.data()), lg.size() * sizeof(float)};
  L.t.origin = where;
  L.n = rows;
  L.vocab = vocab;
  return L;
}

template <class T>
void append(std::vector<T>& a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

template <class T>
Tensor vec_tensor(DType d, std::vector<std::int64_t> shape, const std::vector<T>& v, const char* name) {
  std::vector<std::uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return make_tensor(d, std::move(shape), std::move(b), name);
}

template <class T>
bool vec_from(const SafetensorsFile& f, const char* name, DType d, std::size_t n, std::vector<T>& out) {
  if (!f.contains(name)) return false;
  Tensor t = f.tensor(name);
  if (t.dtype != d || t.numel() != n) return false;
  out.resize(n);
  if (n) std::memcpy(out.data(), t.bytes.data(), n * sizeof(T));
  return true;
}

}  // namespace

void check_checkpoint(const SafetensorsFile& f, const std::string& key, std::int32_t segment,
                      bool verify_checksum) {
  if (verify_checksum) verify_sealed(f);
  auto get = [&](const char* k) {
    auto it = f.metadata().find(k);
    return it == f.metadata().end() ? std::string() : it->second;
  };
  if (get("kerncheck.format") != "checkpoint")
    throw_input_error(f.path(), "metadata kerncheck.format", "\"checkpoint\"", "\"" + get("kerncheck.format").substr(0, 40) + "\"");
  if (get("run") != key)
    throw_input_error(f.path(), "metadata run", "this run's key (model, data, k, variant, command line)",
                      "another run's");
  if (get("segment") != std::to_string(segment))
    throw_input_error(f.path(), "metadata segment", std::to_string(segment), "\"" + get("segment").substr(0, 40) + "\"");
}

bool golden_checkpoint_rows(const SafetensorsFile& f, std::size_t n, std::size_t k, GoldenBuffers& g) {
  return vec_from(f, "top_ids", DType::int32, n * k, g.top_ids) &&
         vec_from(f, "top_logprobs", DType::float32, n * k, g.top_logprobs) &&
         vec_from(f, "other_logprob", DType::float32, n, g.other_logprob) &&
         vec_from(f, "token", DType::int32, n, g.token) &&
         vec_from(f, "token_logprob", DType::float32, n, g.token_logprob) &&
         vec_from(f, "segment", DType::int32, n, g.segment) && vec_from(f, "depth", DType::int32, n, g.depth) &&
         vec_from(f, "phase", DType::uint8, n, g.phase) && vec_from(f, "flags", DType::uint8, n, g.flags);
}

bool candidate_checkpoint_rows(const SafetensorsFile& f, std::size_t n, std::size_t k, CandidateBuffers& c) {
  return vec_from(f, "logprobs_at_ref", DType::float32, n * k, c.logprobs_at_ref) &&
         vec_from(f, "other_logprob", DType::float32, n, c.other_logprob) &&
         vec_from(f, "top1_id", DType::int32, n, c.top1_id) &&
         vec_from(f, "top1_logprob", DType::float32, n, c.top1_logprob) &&
         vec_from(f, "token_logprob", DType::float32, n, c.token_logprob) &&
         vec_from(f, "flags", DType::uint8, n, c.flags);
}

namespace {

// OUT.partial/lock, locked for as long as the recording runs. A process that lost a race with the
// folder's removal (the other recording finished) holds a lock on a deleted file: it tries again.
int lock_folder(const std::string& dir, const std::string& out) {
  const std::string path = dir + "/lock";
  for (int attempt = 0; attempt < 10; ++attempt) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw_input_error(dir, "checkpoint folder", "a folder that can be created", ec.message());
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) throw_input_error(path, "checkpoint lock", "a file that can be created", std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      ::close(fd);
      if (e == EWOULDBLOCK)
        fail("{}: output: expected no other recording onto it, got one running ({} is locked by another "
             "kerncheck record); wait for it to finish, or pick another -o",
             out, path);
      throw_input_error(path, "checkpoint lock", "a lockable file", std::strerror(e));
    }
    struct stat held {}, now {};
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino)
      return fd;
    ::close(fd);  // the folder was removed (and maybe recreated) under us
  }
  throw_input_error(path, "checkpoint lock", "a lock that stays in place", "a folder removed again and again");
}

}  // namespace

CheckpointFolder::CheckpointFolder(const std::string& out, const std::string& key) : dir_(out + ".partial") {
  lock_fd_ = lock_folder(dir_, out);
  const fs::path man = fs::path(dir_) / "manifest.json";
  std::error_code ec;
  bool ok = false;
  if (fs::exists(man, ec)) {
    try {
      ok = read_text_file(man.string(), kConfigTextCap, "a checkpoint manifest") == key;
    } catch (const Error&) {
      ok = false;  // unreadable: start over
    }
    forget_input(man.string());  // read to decide whether to start over: rewriting it clobbers nothing
  }
  if (!ok) {  // another run's (or no) checkpoints: everything but the lock goes
    for (const auto& e : fs::directory_iterator(dir_, ec))
      if (e.path().filename() != "lock") fs::remove_all(e.path(), ec);
    write_file_atomic(man.string(), key);
  }
}

CheckpointFolder::~CheckpointFolder() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void CheckpointFolder::finish() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

Checkpoints::Checkpoints(const std::string& out, const std::string& key, const char* redo)
    : folder_(out, key), key_(key), redo_(redo) {}

std::string Checkpoints::file(std::int32_t i) const {
  return fmt::format("{}/seg-{:05d}.safetensors", folder_.dir(), i);
}

std::optional<SafetensorsFile> Checkpoints::open(std::int32_t i) const {
  std::error_code ec;
  const std::string path = file(i);
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    SafetensorsFile f = SafetensorsFile::open(path);
    forget_input(path);  // a checkpoint rewritten after a discard is not a clobbered input
    check_checkpoint(f, key_, i);
    return f;
  } catch (const Error& e) {
    discard(i, e.what());
    return std::nullopt;
  }
}

void Checkpoints::discard(std::int32_t i, const std::string& why) const {
  std::fputs(terminal_safe(fmt::format("note: checkpoint {} is unusable ({}); discarded, segment {} is {}\n", file(i),
                                       why, i, redo_),
                           true)
                 .c_str(),
             stderr);
  std::error_code ec;
  fs::remove(file(i), ec);
}

void Checkpoints::write(std::int32_t i, const std::vector<NamedTensor>& tensors) const {
  write_sealed_safetensors(file(i), tensors,
                           {{"kerncheck.format", "checkpoint"}, {"run", key_}, {"segment", std::to_string(i)}});
}

namespace {


// Key of a run: what must match for checkpoints to be reused.
std::string run_key(const RecordModelOptions& o, const std::string& mode, const std::string& model_id,
                    const std::string& data_id) {
  return json{{"mode", mode},        {"model", model_id},
              {"data", data_id},     {"k", o.k},
              {"command_line", o.command_line}, {"variant", to_string(parse_variant(o.variant))},
              {"prefill_block", o.prefill_block}}
      .dump();
}

}  // namespace

void record_golden_with_model(const RecordModelOptions& o) {
  Corpus c = read_corpus(o.corpus);
  Loaded L = load_model(o);
  if (L.tokenizer_identity != c.tokenizer_id)
    fail("{}: tokenizer: expected the corpus's tokenizer {} (built from {}), got {} from the model {}", o.corpus,
         c.tokenizer_id, c.tokenizer_origin, L.tokenizer_identity, o.model);
  const std::int64_t V = static_cast<std::int64_t>(L.model->vocab_size());
  if (o.k < 2 || o.k > V || o.k > 4096) fail("-k: expected 2 ≤ k ≤ min(vocab = {}, 4096), got {}", V, o.k);
  std::vector<Job> jobs;
  std::vector<Segment> segs;
  std::vector<std::int32_t> first_tokens;
  std::int64_t start = 0;
  for (std::size_t i = 0; i < c.segments.size(); ++i) {
    const CorpusSegment& s = c.segments[i];
    auto w = c.window(s);
    jobs.push_back({std::vector<std::int32_t>(w.begin(), w.end()), s.depth - s.decode_last, s.depth, start,
                    static_cast<std::int32_t>(i)});
    segs.push_back(Segment{s.name, s.domain, s.depth, start, s.text, s.offsets});
    first_tokens.push_back(w[0]);
    start += s.depth;
  }
  Checkpoints ck(o.out, run_key(o, "golden", L.identity, c.identity()));
  Progress prog("segment", jobs.size(), start);
  const std::size_t k = static_cast<std::size_t>(o.k);
  std::vector<GoldenBuffers> per(jobs.size());  // each segment's rows
  for (auto& g : per) g.k = o.k;
  auto reuse = [&](const Job& j) {
    auto ckf = ck.open(j.index);
    if (!ckf) return false;
    GoldenBuffers& g = per[static_cast<std::size_t>(j.index)];
    if (golden_checkpoint_rows(*ckf, static_cast<std::size_t>(j.depth), k, g)) return true;
    ck.discard(j.index, "tensors of another shape"), g = GoldenBuffers(), g.k = o.k;
    return false;
  };
  auto rows = [&](std::size_t ji, std::int64_t p0, std::int64_t r, std::span<const float> lg) {
    const Job& j = jobs[ji];
    CorpusLayout lay;
    for (std::int64_t p = p0; p < p0 + r; ++p) {
      lay.segment.push_back(j.index);
      lay.depth.push_back(static_cast<std::int32_t>(p + 1));
      lay.phase.push_back(p >= j.n_prefill ? 1 : 0);
    }
    GoldenBuffers part = record_golden(wrap_logits(lg, r, V, fmt::format("{} segment {}", o.model, j.index)),
                                       std::span<const std::int32_t>(j.window).subspan(p0 + 1, r), lay, o.k);
    GoldenBuffers& g = per[ji];
    append(g.top_ids, part.top_ids), append(g.top_logprobs, part.top_logprobs);
    append(g.other_logprob, part.other_logprob), append(g.token, part.token);
    append(g.token_logprob, part.token_logprob), append(g.segment, part.segment);
    append(g.depth, part.depth), append(g.phase, part.phase), append(g.flags, part.flags);
  };
  auto done = [&](const Job& j) {
    const GoldenBuffers& g = per[static_cast<std::size_t>(j.index)];
    const std::size_t n = static_cast<std::size_t>(j.depth);
    KC_ASSERT(g.size() == n, "segment {}: {} rows, expected {}", j.index, g.size(), n);
    L.usage->check("--variant");  // a round: term that met no tensor fails before anything is kept
    const auto N = static_cast<std::int64_t>(n), K = static_cast<std::int64_t>(k);
    ck.write(j.index, {{"top_ids", vec_tensor(DType::int32, {N, K}, g.top_ids, "top_ids")},
                       {"top_logprobs", vec_tensor(DType::float32, {N, K}, g.top_logprobs, "top_logprobs")},
                       {"other_logprob", vec_tensor(DType::float32, {N}, g.other_logprob, "other_logprob")},
                       {"token", vec_tensor(DType::int32, {N}, g.token, "token")},
                       {"token_logprob", vec_tensor(DType::float32, {N}, g.token_logprob, "token_logprob")},
                       {"segment", vec_tensor(DType::int32, {N}, g.segment, "segment")},
                       {"depth", vec_tensor(DType::int32, {N}, g.depth, "depth")},
                       {"phase", vec_tensor(DType::uint8, {N}, g.phase, "phase")},
                       {"flags", vec_tensor(DType::uint8, {N}, g.flags, "flags")}});
  };
  run_jobs(*L.model, jobs, o.prefill_block, o.batch, o.out, reuse, rows, done, prog);
  GoldenBuffers all;
  all.k = o.k;
  for (const GoldenBuffers& g : per) {
    append(all.top_ids, g.top_ids), append(all.top_logprobs, g.top_logprobs);
    append(all.other_logprob, g.other_logprob), append(all.token, g.token);
    append(all.token_logprob, g.token_logprob), append(all.segment, g.segment);
    append(all.depth, g.depth), append(all.phase, g.phase), append(all.flags, g.flags);
  }
  GoldenMeta m;
  m.k = o.k;
  m.vocab = V;
  m.n = static_cast<std::int64_t>(all.size());
  m.identity = {L.identity, c.tokenizer_id, c.identity()};
  m.made_by = {engine_name(*L.model), L.variant, o.command_line};
  m.segments = segs;
  const bool reference = parse_variant(L.variant).is_reference();
  if (!reference)
    std::fprintf(stderr,
                 "note: this golden is recorded with variant %s, not the f32 reference; candidates are judged "
                 "against that variant (metadata %s)\n",
                 L.variant.c_str(), kReferenceKey);
  // The segments' first tokens (needed to rerun the inputs for a candidate) and how the golden was made,
  // under the checksum like every other key.
  m.extra[kCorpusFirstTokensKey] = json(first_tokens).dump();
  m.extra[kPrefillBlockKey] = std::to_string(o.prefill_block);
  m.extra[kReferenceKey] = reference ? "f32" : "not the f32 reference: variant " + L.variant;
  std::string sum = write_golden(o.out, m, all.view());
  ck.finish();
  printf_safe(stdout, "wrote golden %s: %lld positions in %zu segments, k = %d, vocab %lld, checksum %s\n",
              o.out.c_str(), static_cast<long long>(m.n), segs.size(), o.k, static_cast<long long>(V),
              sum.c_str());
}

// Full logits [n, vocab] f32 written row by row into a preallocated .npy (record --logits-out).
class NpyRowWriter {
 public:
  NpyRowWriter(const std::string& path, std::int64_t n, std::int64_t vocab) : path_(path), vocab_(vocab) {
    std::string h = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", n, vocab);
    const std::size_t total = (10 + h.size() + 1 + 63) / 64 * 64;  // magic, version, len, dict, '\n'
    h.append(total - 10 - h.size() - 1, ' ');
    h.push_back('\n');
    check_output_path(path);  // never one of the inputs (the golden, the model)
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) fail("{}: --logits-out: expected a writable file, got an open error", path);
    const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const auto hl = static_cast<std::uint16_t>(h.size());
    const unsigned char len[2] = {static_cast<unsigned char>(hl & 0xFF), static_cast<unsigned char>(hl >> 8)};
    header_ = static_cast<long long>(10 + h.size());
    if (std::fwrite(magic, 1, 8, f_) != 8 || std::fwrite(len, 1, 2, f_) != 2 ||
        std::fwrite(h.data(), 1, h.size(), f_) != h.size())
      throw_input_error(path, "--logits-out", "a writable file with room", std::strerror(errno));
  }
  ~NpyRowWriter() {
    if (f_) std::fclose(f_);
  }
  void rows(std::int64_t pos, std::span<const float> lg) {
    if (fseeko(f_, static_cast<off_t>(header_ + pos * vocab_ * 4), SEEK_SET) != 0 ||
        std::fwrite(lg.data(), sizeof(float), lg.size(), f_) != lg.size())
      throw_input_error(path_, fmt::format("--logits-out position {}", pos), "a writable file with room",
                        std::strerror(errno));
  }
  void close() {
    if (std::fclose(f_) != 0) throw_input_error(path_, "--logits-out", "a writable file with room", std::strerror(errno));
    f_ = nullptr;
  }

 private:
  std::string path_;
  std::int64_t vocab_;
  long long header_ = 0;
  std::FILE* f_ = nullptr;
};

void check_golden_model(const Golden& g, const std::string& model, const std::string& model_id,
                        const std::string& tokenizer_id, bool allow_other_model) {
  if (tokenizer_id != g.meta.identity.tokenizer)
    fail("{}: tokenizer: expected the golden's tokenizer {}, got {} from the model {}", g.path,
         g.meta.identity.tokenizer, tokenizer_id, model);
  if (model_id != g.meta.identity.model && !allow_other_model)
    fail("{}: model: expected the golden's model {}, got {} ({}); pass --allow-other-model to score another "
         "model against it",
         g.path, g.meta.identity.model, model_id, model);
}

std::vector<SegmentReplay> golden_replays(const Golden& g, std::int64_t V) {
  const std::vector<std::int32_t> first = corpus_first_tokens(g);
  std::vector<SegmentReplay> jobs;
  const auto& segs = g.meta.segments;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    std::int64_t b = segs[i].start, e = i + 1 < segs.size() ? segs[i + 1].start : g.meta.n;
    SegmentReplay j;
    j.index = static_cast<std::int32_t>(i);
    j.start = b;
    j.depth = e - b;
    j.window.push_back(first[i]);
    j.n_prefill = 0;
    for (std::int64_t p = b; p < e; ++p) {
      j.window.push_back(g.a.token[p]);
      if (g.a.segment[p] != j.index || g.a.depth[p] != p - b + 1)
        throw_input_error(g.path, fmt::format("segment/depth[{}]", p),
                          fmt::format("segment {}, depth {} (a golden recorded with record --model)", i, p - b + 1),
                          fmt::format("{}, {}", g.a.segment[p], g.a.depth[p]));
      if (g.a.phase[p] == 0) {
        if (j.n_prefill != p - b)
          throw_input_error(g.path, fmt::format("phase[{}]", p), "prefill positions before decode ones",
                            "prefill after decode");
        ++j.n_prefill;
      }
    }
    if (first[i] < 0 || first[i] >= V)
      throw_input_error(g.path, kCorpusFirstTokensKey, fmt::format("ids in [0, {})", V), std::to_string(first[i]));
    if (j.n_prefill < 1)
      throw_input_error(g.path, fmt::format("segments[{}]", i), "at least one prefill position", "none");
    jobs.push_back(std::move(j));
  }
  return jobs;
}

void record_candidate_with_model(const RecordModelOptions& o) {
  Golden g = read_golden(o.golden);
  Loaded L = load_model(o);
  check_golden_model(g, o.model, L.identity, L.tokenizer_identity, o.allow_other_model);
  const std::int64_t V = static_cast<std::int64_t>(L.model->vocab_size());
  if (V != g.meta.vocab)
    throw_input_error(o.model, "vocab", fmt::format("{} (the golden's)", g.meta.vocab), std::to_string(V));
  std::vector<Job> jobs = golden_replays(g, V);
  Checkpoints ck(o.out, run_key(o, "candidate", L.identity, g.meta.checksum));
  std::optional<NpyRowWriter> logits_out;
  if (!o.logits_out.empty()) logits_out.emplace(o.logits_out, g.meta.n, V);
  Progress prog("segment", jobs.size(), g.meta.n);
  const std::size_t k = static_cast<std::size_t>(g.meta.k);
  std::vector<CandidateBuffers> per(jobs.size());  // each segment's rows
  for (auto& c : per) c.k = g.meta.k;
  auto reuse = [&](const Job& j) {
    if (logits_out) return false;  // --logits-out needs every row computed
    auto ckf = ck.open(j.index);
    if (!ckf) return false;
    CandidateBuffers& c = per[static_cast<std::size_t>(j.index)];
    if (candidate_checkpoint_rows(*ckf, static_cast<std::size_t>(j.depth), k, c)) return true;
    ck.discard(j.index, "tensors of another shape"), c = CandidateBuffers(), c.k = g.meta.k;
    return false;
  };
  auto rows = [&](std::size_t ji, std::int64_t p0, std::int64_t r, std::span<const float> lg) {
    const Job& j = jobs[ji];
    if (logits_out) logits_out->rows(j.start + p0, lg.first(static_cast<std::size_t>(r * V)));
    CandidateBuffers part = record_candidate(wrap_logits(lg, r, V, fmt::format("{} segment {}", o.model, j.index)),
                                             g, j.start + p0, j.start + p0 + r);
    CandidateBuffers& c = per[ji];
    append(c.logprobs_at_ref, part.logprobs_at_ref), append(c.other_logprob, part.other_logprob);
    append(c.top1_id, part.top1_id), append(c.top1_logprob, part.top1_logprob);
    append(c.token_logprob, part.token_logprob), append(c.flags, part.flags);
  };
  auto done = [&](const Job& j) {
    const CandidateBuffers& c = per[static_cast<std::size_t>(j.index)];
    const std::size_t n = static_cast<std::size_t>(j.depth);
    KC_ASSERT(c.size() == n, "segment {}: {} rows, expected {}", j.index, c.size(), n);
    L.usage->check("--variant");
    const auto N = static_cast<std::int64_t>(n), K = static_cast<std::int64_t>(k);
    ck.write(j.index,
             {{"logprobs_at_ref", vec_tensor(DType::float32, {N, K}, c.logprobs_at_ref, "logprobs_at_ref")},
              {"other_logprob", vec_tensor(DType::float32, {N}, c.other_logprob, "other_logprob")},
              {"top1_id", vec_tensor(DType::int32, {N}, c.top1_id, "top1_id")},
              {"top1_logprob", vec_tensor(DType::float32, {N}, c.top1_logprob, "top1_logprob")},
              {"token_logprob", vec_tensor(DType::float32, {N}, c.token_logprob, "token_logprob")},
              {"flags", vec_tensor(DType::uint8, {N}, c.flags, "flags")}});
  };
  run_jobs(*L.model, jobs, o.prefill_block, o.batch, o.out, reuse, rows, done, prog);
  CandidateBuffers all;
  all.k = g.meta.k;
  for (const CandidateBuffers& c : per) {
    append(all.logprobs_at_ref, c.logprobs_at_ref), append(all.other_logprob, c.other_logprob);
    append(all.top1_id, c.top1_id), append(all.top1_logprob, c.top1_logprob);
    append(all.token_logprob, c.token_logprob), append(all.flags, c.flags);
  }
  CandidateMeta m = candidate_meta_for(g, {engine_name(*L.model), L.variant, o.command_line});
  m.extra[kPrefillBlockKey] = std::to_string(o.prefill_block);
  std::string sum = write_candidate(o.out, m, all.view());
  ck.finish();
  if (logits_out) logits_out->close();
  printf_safe(stdout, "wrote candidate %s: %lld positions of %s, checksum %s\n", o.out.c_str(),
              static_cast<long long>(m.n), o.golden.c_str(), sum.c_str());
}

}  // namespace kc
