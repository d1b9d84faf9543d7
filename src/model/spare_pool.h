// One spare object handed to the next caller instead of a fresh one. The engines keep their work buffers
// here between prefill/decode calls: a fresh 512-token scratch is tens of MB of new pages (SmolLM2's logits
// alone are 100 MB), and their first-touch faults cost 5–10% of a prefill. Thread-safe: concurrent calls on
// one model each get their own buffers (the second caller gets a fresh object).
#pragma once
#include <memory>
#include <mutex>

namespace kc {

template <class T>
class SparePool {
 public:
  // A function-pointer deleter, so that owners may hold a SparePool of a type that is incomplete where
  // they are declared (a model's private Scratch).
  using Ptr = std::unique_ptr<T, void (*)(T*)>;
  Ptr take() {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (spare_) return std::move(spare_);
    }
    return Ptr(new T, [](T* p) { delete p; });
  }
  void give_back(Ptr p) {
    std::lock_guard<std::mutex> g(mu_);
    spare_ = std::move(p);
  }

 private:
  std::mutex mu_;
  Ptr spare_{nullptr, nullptr};
};

}  // namespace kc
