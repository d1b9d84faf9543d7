#include "lab/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "core/mapped_file.h"
#include "golden/corpus.h"
#include "lab/record_model.h"
#include "model/variant.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"

namespace kc {

namespace {

using json = nlohmann::json;

const std::vector<std::string> kDefaultTensors = {"attn.out", "mlp.out", "hidden", "gdn.state"};

bool is_state(std::string_view name) { return name.find("state") != std::string_view::npos; }

std::string phase_name(int phase) { return phase == 0 ? "prefill" : fmt::format("decode{}", phase); }

// The traced tensors of one run, per (name, layer, phase) and head (-1: not per head). Phase 0 is the
// prefill, phase s ≥ 1 decode step s. Positional tensors hold [phase rows, cols]; state tensors the last
// event of the phase.
class Capture {
 public:
  struct Slot {
    std::size_t cols = 0;
    std::map<int, std::vector<float>> heads;
  };
  using Key = std::tuple<std::string, int, int>;

  explicit Capture(std::vector<std::string> names) : names_(std::move(names)) {}

  void start_phase(int phase, std::size_t pos0, std::size_t rows) {
    phase_ = phase, pos0_ = pos0, rows_ = rows;
  }

  void on(const engine::TensorEvent& ev) {
    if (ev.name == "attn.p") return;  // refused by run_trace; per-head, from worker threads
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.find(ev.name) == seen_.end()) seen_.emplace(ev.name);
    if (std::find(names_.begin(), names_.end(), ev.name) == names_.end()) return;
    Slot& s = slots_[Key{std::string(ev.name), ev.layer, phase_}];
    if (s.cols == 0) s.cols = ev.cols;
    if (s.cols != ev.cols)
      fail("trace: tensor {} at layer {}: expected {} columns in every event, got {}", ev.name, ev.layer,
           s.cols, ev.cols);
    std::vector<float>& buf = s.heads[ev.head];
    if (is_state(ev.name)) {
      buf.assign(ev.data.begin(), ev.data.end());
      return;
    }
    if (ev.pos0 < pos0_ || ev.pos0 + ev.rows > pos0_ + rows_)
      fail(
          "trace: tensor {} at layer {}: expected rows of positions {} … {}, got {} … {} (trace compares "
          "per-position tensors and *state* tensors)",
          ev.name, ev.layer, pos0_, pos0_ + rows_ - 1, ev.pos0, ev.pos0 + ev.rows - 1);
    buf.resize(rows_ * s.cols);
    std::copy(ev.data.begin(), ev.data.end(), buf.begin() + (ev.pos0 - pos0_) * s.cols);
  }

  const std::map<Key, Slot>& slots() const { return slots_; }
  bool seen(const std::string& n) const { return seen_.count(n) != 0; }
  std::string seen_list() const {
    std::string s;
    for (const auto& n : seen_) s += (s.empty() ? "" : ", ") + n;
    return s;
  }

 private:
  std::vector<std::string> names_;
  std::mutex mu_;
  std::map<Key, Slot> slots_;
  std::set<std::string, std::less<>> seen_;
  int phase_ = 0;
  std::size_t pos0_ = 0, rows_ = 0;
};

struct Run {
  std::vector<float> prefill_logits;              // [V], last prefill position
  std::vector<std::vector<float>> decode_logits;  // per step [V]
};

std::int32_t argmax(std::span<const float> x) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<std::int32_t>(best);
}

// Prefill (in blocks if asked), then one decode per token of `feed` (empty: greedy, `steps` tokens).
Run run_once(const CausalLM& m, const std::vector<std::int32_t>& prompt, int prefill_block, int steps,
             std::vector<std::int32_t>& feed, Capture& cap) {
  Run r;
  const std::size_t V = m.vocab_size(), T = prompt.size();
  auto st = m.new_state();
  cap.start_phase(0, 0, T);
  const std::size_t block = prefill_block > 0 ? static_cast<std::size_t>(prefill_block) : T;
  const std::span<const std::int32_t> p(prompt);
  for (std::size_t b = 0; b < T; b += block)
    m.prefill(*st, p.subspan(b, std::min(block, T - b)),
              [&](std::size_t pos0, std::size_t rows, std::span<const float> lg) {
                if (pos0 + rows == T) r.prefill_logits.assign(lg.end() - V, lg.end());
              });
  KC_ASSERT(r.prefill_logits.size() == V, "trace: no logits for the last prefill position");
  const bool greedy = feed.empty();
  std::int32_t next = argmax(r.prefill_logits);
  for (int s = 1; s <= steps; ++s) {
    if (greedy) feed.push_back(next);
    cap.start_phase(s, T + s - 1, 1);
    r.decode_logits.push_back(m.decode(*st, feed[s - 1]));
    next = argmax(r.decode_logits.back());
  }
  return r;
}

LogitsTrace logits_trace(std::span<const float> var, std::span<const float> ref) {
  auto log_softmax = [](std::span<const float> x) {
    double mx = -INFINITY;
    for (float v : x) mx = std::max(mx, static_cast<double>(v));
    double s = 0;
    for (float v : x) s += std::exp(v - mx);
    std::vector<double> lp(x.size());
    const double lse = mx + std::log(s);
    for (std::size_t i = 0; i < x.size(); ++i) lp[i] = x[i] - lse;
    return lp;
  };
  std::vector<double> lr = log_softmax(ref), lv = log_softmax(var);
  double kl = 0;
  for (std::size_t i = 0; i < lr.size(); ++i) kl += std::exp(lr[i]) * (lr[i] - lv[i]);
  return {relative_l2_error(var, ref), std::max(kl, 0.0)};
}

std::string read_text(const std::string& path) {
  return read_text_file(path, kDataTextCap, "a --prompt file");
}

Tensor f32_tensor(std::vector<std::int64_t> shape, const std::vector<float>& v, const std::string& name) {
  std::vector<std::uint8_t> b(v.size() * sizeof(float));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return make_tensor(DType::float32, std::move(shape), std::move(b), name);
}

Tensor i32_tensor(const std::vector<std::int32_t>& v, const std::string& name) {
  std::vector<std::uint8_t> b(v.size() * sizeof(std::int32_t));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return make_tensor(DType::int32, {static_cast<std::int64_t>(v.size())}, std::move(b), name);
}

void write_dump(const TraceOptions& o, const TraceResult& res, const Capture& ref, const Capture& var,
                const Run& rr, const Run& vr) {
  std::vector<NamedTensor> ts;
  ts.push_back({"prompt", i32_tensor(res.prompt, "prompt")});
  ts.push_back({"decoded", i32_tensor(res.decoded, "decoded")});
  for (auto [run, cap, lg] : {std::tuple{"ref", &ref, &rr}, std::tuple{"var", &var, &vr}}) {
    for (const auto& [key, slot] : cap->slots()) {
      const auto& [name, layer, phase] = key;
      for (const auto& [head, data] : slot.heads) {
        std::string n = fmt::format("{}/{}/{}@{}", run, phase_name(phase), name, layer);
        if (head >= 0) n += fmt::format("#{}", head);
        const auto cols = static_cast<std::int64_t>(slot.cols);
        ts.push_back({n, f32_tensor({static_cast<std::int64_t>(data.size()) / cols, cols}, data, n)});
      }
    }
    const auto V = static_cast<std::int64_t>(lg->prefill_logits.size());
    ts.push_back({fmt::format("{}/prefill/logits", run), f32_tensor({V}, lg->prefill_logits, "logits")});
    for (std::size_t s = 0; s < lg->decode_logits.size(); ++s)
      ts.push_back({fmt::format("{}/{}/logits", run, phase_name(static_cast<int>(s + 1))),
                    f32_tensor({V}, lg->decode_logits[s], "logits")});
  }
  write_safetensors(o.dump, ts,
                    {{"kerncheck.format", "trace"},
                     {"model", o.model},
                     {"variant", res.variant},
                     {"reference", res.reference},
                     {"prefill_block", std::to_string(res.prefill_block)},
                     {"reference_prefill_block", std::to_string(res.reference_prefill_block)},
                     {"tensor names", "RUN/PHASE/NAME@LAYER[#HEAD]: RUN ref|var, PHASE prefill|decodeN"}});
}

}  // namespace

double relative_l2_error(std::span<const float> a, std::span<const float> b) {
  double d2 = 0, b2 = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    d2 += d * d, b2 += static_cast<double>(b[i]) * b[i];
  }
  if (b2 == 0) return d2 == 0 ? 0.0 : INFINITY;
  return std::sqrt(d2 / b2);
}

double TensorTrace::decode_mean() const {
  if (decode.empty()) return 0;
  double s = 0;
  for (double d : decode) s += d;
  return s / static_cast<double>(decode.size());
}

TraceResult run_trace(const TraceOptions& o) {
  const Variant variant = parse_variant(o.variant, "--variant");
  const Variant reference = parse_variant(o.reference, "--reference");
  if (o.decode_steps < 0 || o.decode_steps > 4096)
    fail("--decode-steps: expected 0 … 4096, got {}", o.decode_steps);
  if (o.decode_last < 0 || o.decode_last > 4096)
    fail("--decode-last: expected 0 … 4096, got {}", o.decode_last);
  if (o.prefill_block < 0)
    fail("--prefill-block: expected 0 (one call) or a block size ≥ 1, got {}", o.prefill_block);
  if (o.reference_prefill_block < -1)
    fail("--reference-prefill-block: expected 0 (one call) or a block size ≥ 1, got {}",
         o.reference_prefill_block);
  std::vector<std::string> names = o.tensors.empty() ? kDefaultTensors : o.tensors;
  for (const auto& n : names) {
    if (n == "attn.p")
      fail(
          "--tensors: attn.p: expected per-position tensors or *state* tensors, got attn.p (per head and "
          "tile, "
          "[rows, keys]; trace attn.ctx to see its effect)");
    if (n == "logits")
      fail("--tensors: logits: expected hook names other than logits (always traced, last position), got logits");
    if (n.empty()) fail("--tensors: expected comma-separated hook names (docs/engine.md), got an empty name");
  }

  TraceResult res;
  res.model = o.model;
  res.variant = to_string(variant);
  res.reference = to_string(reference);
  res.prefill_block = o.prefill_block;
  res.reference_prefill_block = o.reference_prefill_block < 0 ? o.prefill_block : o.reference_prefill_block;
  Tokenizer tok = load_tokenizer(tokenizer_source(o.model, o.tokenizer));
  res.prompt = tok.encode(read_text(o.prompt_file));
  if (res.prompt.empty())
    throw_input_error(o.prompt_file, "--prompt", "a text of at least one token", "empty");
  if (res.prompt.size() > o.max_tokens)
    throw_input_error(o.prompt_file, "--prompt",
                      fmt::format("at most {} tokens (--max-tokens)", o.max_tokens),
                      fmt::format("{} tokens", res.prompt.size()));
  if (o.decode_last > 0) {
    const auto n = static_cast<std::size_t>(o.decode_last);
    if (n >= res.prompt.size())
      throw_input_error(o.prompt_file, "--decode-last",
                        fmt::format("a prompt longer than {} tokens (one token at least is prefilled)", n),
                        fmt::format("{} tokens", res.prompt.size()));
    res.decoded.assign(res.prompt.end() - static_cast<std::ptrdiff_t>(n), res.prompt.end());
    res.prompt.resize(res.prompt.size() - n);
    res.teacher_forced = true;
  }
  const int steps = o.decode_last > 0 ? o.decode_last : o.decode_steps;

  std::unique_ptr<CausalLM> m = load_causal_lm(o.model);
  check_vocab_size(tok, m->vocab_size(), o.model, !is_gguf_model(o.model));

  // The reference first, on the untouched weights; then the variant on the same model (bf16 weight rounding
  // is idempotent), unless the reference rounded the weights and the variant must not.
  Capture ref(names), var(names);
  auto ref_usage = apply_variant(*m, reference, [&](const engine::TensorEvent& ev) { ref.on(ev); });
  Run rr = run_once(*m, res.prompt, res.reference_prefill_block, steps, res.decoded, ref);
  if (!o.tensors.empty())
    for (const auto& n : names)
      if (!ref.seen(n))
        fail("--tensors: {}: expected a tensor the model reports, got none of that name; its tensors: {}", n,
             ref.seen_list());
  ref_usage->check("--reference");
  if (reference.bf16_base && !variant.bf16_base) m = load_causal_lm(o.model);
  auto usage = apply_variant(*m, variant, [&](const engine::TensorEvent& ev) { var.on(ev); });
  Run vr = run_once(*m, res.prompt, o.prefill_block, steps, res.decoded, var);
  usage->check("--variant");
  m->set_hook(nullptr);

  // Errors per (layer, name): phases in order.
  std::map<std::pair<int, std::size_t>, TensorTrace> by;
  for (const auto& [key, rslot] : ref.slots()) {
    const auto& [name, layer, phase] = key;
    const std::size_t order = std::find(names.begin(), names.end(), name) - names.begin();
    TensorTrace& t = by[{layer, order}];
    t.name = name, t.layer = layer;
    double d2 = 0, b2 = 0;
    auto it = var.slots().find(key);
    bool ok = it != var.slots().end() && it->second.heads.size() == rslot.heads.size();
    for (const auto& [head, b] : rslot.heads) {
      if (!ok) break;
      auto vh = it->second.heads.find(head);
      if (vh == it->second.heads.end() || vh->second.size() != b.size()) {
        ok = false;
        break;
      }
      const double e = relative_l2_error(vh->second, b);  // combine heads: Σ d² / Σ b²
      double bb = 0;
      for (float x : b) bb += static_cast<double>(x) * x;
      d2 += e * e * bb, b2 += bb;
    }
    const double e = !ok ? NAN : b2 == 0 ? (d2 == 0 ? 0.0 : INFINITY) : std::sqrt(d2 / b2);
    if (phase == 0)
      t.prefill = e;
    else {
      if (t.decode.size() < static_cast<std::size_t>(phase)) t.decode.resize(phase, NAN);
      t.decode[phase - 1] = e;
    }
  }
  for (auto& [k, t] : by) res.tensors.push_back(std::move(t));
  res.prefill_logits = logits_trace(vr.prefill_logits, rr.prefill_logits);
  for (std::size_t s = 0; s < rr.decode_logits.size(); ++s)
    res.decode_logits.push_back(logits_trace(vr.decode_logits[s], rr.decode_logits[s]));
  if (!o.dump.empty()) write_dump(o, res, ref, var, rr, vr);
  return res;
}

std::string trace_text(const TraceResult& r) {
  std::string s = fmt::format(
      "kerncheck trace: {}\nvariant {} against reference {}; prompt {} tokens, {} decode steps ({})\n"
      "relative error ‖variant − reference‖₂ / ‖reference‖₂:\n",
      r.model, r.variant, r.reference, r.prompt.size(), r.decoded.size(),
      r.teacher_forced ? "the prompt's last tokens" : "the reference's greedy tokens");
  auto calls = [](int b) { return b > 0 ? fmt::format("calls of {} tokens", b) : std::string("one call"); };
  if (r.prefill_block > 0 || r.reference_prefill_block > 0)
    s += fmt::format("prefill: variant {}, reference {}\n", calls(r.prefill_block),
                     calls(r.reference_prefill_block));
  s += fmt::format("{:>5}  {:<12} {:>9}", "layer", "tensor", "prefill");
  for (std::size_t i = 0; i < r.decoded.size(); ++i)
    s += fmt::format(" {:>9}", fmt::format("decode{}", i + 1));
  if (!r.decoded.empty()) s += fmt::format(" {:>9}", "dec.mean");
  s += "\n";
  for (const auto& t : r.tensors) {
    s += fmt::format("{:>5}  {:<12} {:>9.3e}", t.layer < 0 ? std::string("-") : std::to_string(t.layer),
                     t.name, t.prefill);
    for (std::size_t i = 0; i < r.decoded.size(); ++i)
      s += fmt::format(" {:>9.3e}", i < t.decode.size() ? t.decode[i] : NAN);
    if (!r.decoded.empty()) s += fmt::format(" {:>9.3e}", t.decode_mean());
    s += "\n";
  }
  auto line = [&](const char* what, auto get) {
    s += fmt::format("{:>5}  {:<12} {:>9.3e}", "-", what, get(r.prefill_logits));
    double sum = 0;
    for (const auto& l : r.decode_logits) s += fmt::format(" {:>9.3e}", get(l)), sum += get(l);
    if (!r.decode_logits.empty())
      s += fmt::format(" {:>9.3e}", sum / static_cast<double>(r.decode_logits.size()));
    s += "\n";
  };
  line("logits", [](const LogitsTrace& l) { return l.rel_err; });
  line("KL(ref‖var)", [](const LogitsTrace& l) { return l.kl; });
  // The seed's figure: the first layer's attention output against the final logits.
  for (const auto& t : r.tensors)
    if (t.name == "attn.out") {
      double lm = 0;
      for (const auto& l : r.decode_logits) lm += l.rel_err;
      if (!r.decode_logits.empty()) lm /= static_cast<double>(r.decode_logits.size());
      s += fmt::format(
          "first attention layer ({}) attn.out error {:.3e} prefill, {:.3e} decode mean; final logits {:.3e} "
          "prefill (last position), {:.3e} decode mean\n",
          t.layer, t.prefill, t.decode_mean(), r.prefill_logits.rel_err, lm);
      break;
    }
  return s;
}

std::string trace_json(const TraceResult& r) {
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  json j;
  j["model"] = r.model;
  j["variant"] = r.variant;
  j["reference"] = r.reference;
  j["prefill_block"] = r.prefill_block;
  j["reference_prefill_block"] = r.reference_prefill_block;
  j["prompt_tokens"] = r.prompt.size();
  j["decoded"] = r.decoded;
  j["teacher_forced"] = r.teacher_forced;
  j["tensors"] = json::array();
  for (const auto& t : r.tensors) {
    json d = json::array();
    for (double e : t.decode) d.push_back(num(e));
    j["tensors"].push_back({{"name", t.name},
                            {"layer", t.layer},
                            {"prefill", num(t.prefill)},
                            {"decode", d},
                            {"decode_mean", num(t.decode_mean())}});
  }
  auto lj = [&](const LogitsTrace& l) { return json{{"rel_err", num(l.rel_err)}, {"kl", num(l.kl)}}; };
  j["logits"]["prefill"] = lj(r.prefill_logits);
  j["logits"]["decode"] = json::array();
  for (const auto& l : r.decode_logits) j["logits"]["decode"].push_back(lj(l));
  return j.dump(2) + "\n";
}

}  // namespace kc
