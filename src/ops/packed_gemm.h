// Own f32 GEMM for the Llama engine's linear layers, over weights packed once at load.
//
// A weight w[n, k] (HF [out, in], row-major) is stored in the micro-kernel's order: panel p holds output
// columns 32p … 32p+31 as [k][32] (k-major, the last panel zero-padded), so the kernel reads each panel as
// one contiguous stream and nothing is re-packed per call (a tiled cblas_sgemm re-packs its weights and
// activations in every tile call, ~15% of the multiply on SmolLM2's shapes).
//
// Determinism: every output element is one chain of f32 fma over k = 0 … k-1 in order, from 0, then + bias:
//   y[i, j] = fma(x[i, k-1], w[j, k-1], … fma(x[i, 1], w[j, 1], x[i, 0]·w[j, 0]) …) (+ bias[j])
// No tile, thread count or row count (decode m = 1 vs prefill) changes that chain, so the result is bitwise
// the same for any thread count and tiling, a decoded token's logits equal its prefill row, and the scalar
// twin (packed_gemm_scalar, std::fma in the same order) gives the same bits.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>
#include <vector>

namespace kc::engine {

// 64-byte aligned allocator: a 32-float panel row is then exactly two cache lines.
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(std::size_t n) {
    void* p = ::operator new(n * sizeof(T), std::align_val_t(64));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const Aligned64<U>&) const {
    return true;
  }
};

inline constexpr std::size_t kPanelCols = 32;  // output columns per weight panel (two zmm)

class PackedMatrix {
 public:
  PackedMatrix() = default;
  PackedMatrix(const float* w, std::size_t n, std::size_t k) { pack(w, n, k); }
  void pack(const float* w, std::size_t n, std::size_t k);  // w: row-major [n, k]
  std::size_t rows() const { return n_; }                   // n (outputs)
  std::size_t cols() const { return k_; }                   // k (inputs)
  bool empty() const { return n_ == 0; }
  std::size_t panels() const { return (n_ + kPanelCols - 1) / kPanelCols; }
  const float* panel(std::size_t p) const { return data_.data() + p * k_ * kPanelCols; }
  void unpack(float* out) const;  // row-major [n, k]
  std::vector<float> unpack() const;
  void row(std::size_t r, float* out) const;  // w[r, :] (k floats)

 private:
  std::size_t n_ = 0, k_ = 0;
  std::vector<float, Aligned64<float>> data_;  // panels() · k · 32
};

// y[m, n] = x[m, k] · wᵀ (+ bias[n]), x and y row-major (ld = k, n). Multi-threaded (kc::parallel_for).
void packed_gemm(const float* x, std::size_t m, const PackedMatrix& w, float* y, const float* bias = nullptr);

// Several products of the same x (Q/K/V, gate/up): x is packed once and every op's tiles share one
// parallel region. Each op's result is bitwise the single-op packed_gemm's.
struct PackedGemmOp {
  const PackedMatrix* w;
  float* y;
  const float* bias = nullptr;
};
void packed_gemm(const float* x, std::size_t m, std::span<const PackedGemmOp> ops);

// The scalar twin: the same fma chains with std::fma, one element at a time. Bitwise equal to packed_gemm.
void packed_gemm_scalar(const float* x, std::size_t m, const PackedMatrix& w, float* y,
                        const float* bias = nullptr);

}  // namespace kc::engine
