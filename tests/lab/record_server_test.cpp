// record --server's reading of SGLang prefill windows (src/lab/record_server.h): the default window (64
// depths per request, SGLang only), and responses whose count or rows do not match the window plan.
#include "lab/record_server.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace kc {
namespace {

using nlohmann::json;

// An SGLang /generate response scoring depths [a, b] of `t` (logprob_start_len a − 1): the rows of tokens
// a − 1 … b, SGLang's null pad first; every row lists its own token at log-prob −1.5.
std::string prefill_response(const std::vector<std::int32_t>& t, std::int64_t a, std::int64_t b) {
  json tokens = json::array(), top = json::array({nullptr});
  tokens.push_back({nullptr, t[a - 1], nullptr});
  for (std::int64_t j = a; j <= b; ++j) {
    tokens.push_back({-1.5, t[j], nullptr});
    top.push_back(json::array({json::array({-1.5, t[j], nullptr})}));
  }
  return json{{"text", ""},
              {"output_ids", {1}},
              {"meta_info",
               {{"prompt_tokens", b + 1},
                {"cached_tokens", a - 1},
                {"input_token_logprobs", tokens},
                {"input_top_logprobs", top},
                {"output_token_logprobs", {{-0.5, 1, nullptr}}}}},
              {"prompt_token_ids", std::vector<std::int32_t>(t.begin(), t.begin() + b + 1)}}
      .dump();
}

std::string refusal(const std::vector<std::int32_t>& t, const std::vector<std::string>& responses, int window) {
  try {
    read_segment_responses("sglang", "prefill", t, 0, 16, responses, window);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SglangPrefillWindow, DefaultIs64DepthsAndOnlyForSglang) {
  RecordServerOptions o;
  o.api = "sglang";
  EXPECT_EQ(sglang_prefill_window(o), 64);
  o.prefill_window = 0;
  EXPECT_EQ(sglang_prefill_window(o), 0);
  o.prefill_window = 7;
  EXPECT_EQ(sglang_prefill_window(o), 7);
  o.api = "vllm";
  EXPECT_EQ(sglang_prefill_window(o), 0);  // vLLM: one request per segment
}

TEST(SglangPrefillWindow, A100DepthSegmentIsTwoRequestsByDefault) {
  std::vector<std::int32_t> t(101);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>(i % 16);
  const std::vector<std::string> whole = {prefill_response(t, 1, 100)};
  const std::vector<std::string> two = {prefill_response(t, 1, 64), prefill_response(t, 65, 100)};
  EXPECT_EQ(refusal(t, whole, 0), "");  // window 0: the whole segment in one response
  EXPECT_EQ(refusal(t, two, -1), "");   // the default: depths 1…64, then 65…100
  EXPECT_NE(refusal(t, whole, -1).find("responses: expected 2 responses, got 1"), std::string::npos)
      << refusal(t, whole, -1);
  // The second window's rows must start at token 64 (logprob_start_len 64), not at token 0.
  const std::vector<std::string> shifted = {prefill_response(t, 1, 64), prefill_response(t, 1, 100)};
  const std::string e = refusal(t, shifted, -1);
  EXPECT_NE(e.find("(prefill depths 65…100)"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 37 entries from prompt token 64"), std::string::npos) << e;
}

}  // namespace
}  // namespace kc
