// load_causal_lm: dispatch on the checkpoint's architecture.
#include "model/causal_lm.h"

#include "model/llama.h"

namespace kc {

std::unique_ptr<CausalLM> load_causal_lm(const std::string& path, const LoadOptions& opt) {
  return std::make_unique<LlamaModel>(LlamaModel::load(path, opt));
}

}  // namespace kc
