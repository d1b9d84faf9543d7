// load_causal_lm: dispatch on the checkpoint's architecture.
#include "model/causal_lm.h"
#include "core/mapped_file.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/hybrid.h"
#include "model/llama.h"

namespace kc {
namespace {

// model_type of an HF checkpoint folder (or of text_config in a vision-language wrapper); "" when `path`
// is not a folder with a readable config.json (the Llama loader then reports what is wrong).
std::string hf_model_type(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir(path);
  if (dir.filename() == "config.json") dir = dir.parent_path();
  if (!fs::is_directory(dir, ec)) return {};
  if (!fs::exists(dir / "config.json", ec)) return {};
  const auto j = nlohmann::json::parse(read_text_file((dir / "config.json").string(), kConfigTextCap, "a config.json"),
                                       nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("model_type") || !j["model_type"].is_string()) return {};
  return j["model_type"].get<std::string>();
}

}  // namespace

std::unique_ptr<CausalLM> load_causal_lm(const std::string& path, const LoadOptions& opt) {
  const std::string type = hf_model_type(path);
  if (HybridModel::is_hybrid_model_type(type)) {
    std::filesystem::path dir(path);
    if (dir.filename() == "config.json") dir = dir.parent_path();
    return std::make_unique<HybridModel>(HybridModel::load(dir.string()));
  }
  return std::make_unique<LlamaModel>(LlamaModel::load(path, opt));
}

}  // namespace kc
