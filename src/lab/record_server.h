// Golden and candidate files recorded from a running inference server (docs/engines.md): kerncheck sends
// each corpus segment as token ids and turns the engine's log-probs into the files `kerncheck import`
// writes, through the same code (parse_vllm_logprobs / parse_sglang_logprobs, candidate_from_engine,
// write_golden_from_topk).
//
// Per segment (t_0 … t_D, golden positions at depths 1 … D):
//   prefill  one POST /v1/completions {prompt: [t_0 … t_D], max_tokens: 1, prompt_logprobs: K',
//            return_token_ids: true}: row d of prompt_logprobs is the prefill distribution at depth d.
//   decode   per decode position d, one POST {prompt: [t_0 … t_{d−1}], max_tokens: 1, logprobs: K',
//            allowed_token_ids: [t_d], return_tokens_as_token_ids: true}: the one generated token is a
//            decode step over the cached prefix (prefix caching on); its top-K' raw log-probs (vLLM's
//            default logprobs_mode, before allowed_token_ids masks the logits) are that position's row,
//            and the forced token t_d is listed with its own log-prob.
// SGLang (--api sglang, POST /generate; io_struct.py GenerateReqInput, tokenizer_manager.py meta_info):
//   prefill  {input_ids: [t_0 … t_D], sampling_params: {max_new_tokens: 1, temperature: 0},
//            return_logprob: true, logprob_start_len: 0, top_logprobs_num: K', token_ids_logprob: the union
//            of the golden's top-k ids (candidate mode) and the corpus tokens}: row d of
//            meta_info.input_{token_logprobs, top_logprobs, token_ids_logprobs} (parse_sglang_logprobs).
//   decode   {input_ids: [t_0 … t_{d−1}], max_new_tokens: 1, token_ids_logprob: t_d and the golden's ids
//            at d}: meta_info.output_* row 0 (the same reader), meta_info.cached_tokens for the cache.
// Phases: prefill = every position from the prefill request; both = the golden's decode positions from
// decode steps, the rest from prefill; decode = every position from a decode step.
//
// Every row is checked at its response: ids distinct and in the vocabulary, log-probs ≤ 0, mass ≤ 1 (+ f32
// rounding). Responses longer than --max-response-mb are refused, and each exchange ends after --timeout
// however slowly the server sends.
//
// Resumable: each finished segment's raw responses go to OUT.partial/seg-NNNNN.safetensors (sealed, keyed
// by server URL, served model, API, golden or corpus, K', phase, k, variant and model id), with a manifest
// naming the run and a lock held while recording (a second recording onto OUT is refused); a rerun of the
// same run reuses them, read again as the responses were. Any failure (HTTP error after the retries,
// timeout, malformed JSON, wrong token echo, an impossible row) throws kc::Error (exit 3) and writes no
// output file.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace kc {

class SafetensorsFile;

struct RecordServerOptions {
  std::string url;                 // e.g. http://127.0.0.1:8321 (no trailing /v1)
  std::string api = "vllm";        // vllm (POST /v1/completions) | sglang (POST /generate)
  std::string served_model;        // the request's "model"; empty: the first of GET /v1/models
  std::string corpus, golden;      // golden mode: corpus; candidate mode: golden
  std::string out, command_line, variant, model_id;
  int k = 20;                      // golden mode: top-k kept (≤ top_logprobs)
  int top_logprobs = 20;           // K' asked of the engine (vLLM caps it with --max-logprobs)
  std::string phase = "both";      // prefill | decode | both
  int concurrency = 4;             // segments in flight
  double timeout_s = 300;          // per request
  int retries = 3;                 // per request, after the first try (HTTP 5xx, 429, network, timeout)
  double backoff_s = 1;            // first retry delay, doubled each retry
  int repeat = 1;                  // candidate mode: record N times (the engine's own noise runs)
  int max_response_mb = 256;       // per response
  int prefill_window = -1;         // SGLang: prefill depths per request (-1: kSglangPrefillWindow; 0: all)
  std::map<std::string, std::string> extra;  // candidate mode: more metadata for the file (kerncheck floor:
                                             // its configuration, the engine's version, the hardware)
};

// SGLang's default prefill window: a response lists at most (k+1)·64 ids at each of 64 positions (~3 MB at
// k = 20) however deep the segment.
inline constexpr int kSglangPrefillWindow = 64;
inline int sglang_prefill_window(const RecordServerOptions& o) {
  return o.api != "sglang" ? 0 : o.prefill_window < 0 ? kSglangPrefillWindow : o.prefill_window;
}

// With repeat N > 1, run r (1 … N) goes to repetition_path(out, r, N) and carries metadata
// repetition = r, repetitions = N; each run is a full recording with its own OUT.partial checkpoints.
void record_with_server(const RecordServerOptions& o);
// OUT for N = 1; else OUT with ".r" before its extension: c.safetensors → c.1.safetensors, c.2.safetensors.
std::string repetition_path(const std::string& out, int r, int n);

// A checkpoint's responses (tensors "responses", "response_ends"), after check_checkpoint; throws kc::Error
// naming the file for any other layout.
std::vector<std::string> checkpoint_responses(const SafetensorsFile& f);
// The reader of one segment's responses on its own (fuzzing): tokens t_0 … t_D, depths 1 … n_prefill
// prefill, `responses` as the server sent them (prefill first when the phase asks for it, then one per
// decode depth; SGLang: one prefill response per window of prefill_window depths, 0 the whole segment);
// throws kc::Error for any response record --server refuses.
void read_segment_responses(const std::string& api, const std::string& phase, std::span<const std::int32_t> tokens,
                            std::int64_t n_prefill, std::int64_t vocab, const std::vector<std::string>& responses,
                            int prefill_window = 0);

}  // namespace kc
