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
//
// A matrix whose every value is a bf16 (the lab's bf16 base rounds the weights) is stored as bf16 panels: half
// the bytes for a decode step to read, widened to f32 exactly in the kernels, so the same values enter the same
// chains and the bits do not change.
#pragma once
#include <cstddef>
#include <cstdint>
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
  // w: row-major [n, k]. Stored as bf16 panels when every value is exactly a bf16 (its low 16 bits zero:
  // no information lost), else as f32 panels.
  void pack(const float* w, std::size_t n, std::size_t k);
  std::size_t rows() const { return n_; }                   // n (outputs)
  std::size_t cols() const { return k_; }                   // k (inputs)
  bool empty() const { return n_ == 0; }
  bool bf16() const { return bf16_; }                       // which of the two storages holds the panels
  std::size_t panels() const { return (n_ + kPanelCols - 1) / kPanelCols; }
  const float* panel(std::size_t p) const;                  // f32 storage: [k][32]
  const std::uint16_t* panel_bf16(std::size_t p) const;     // bf16 storage: [k][32], the f32's high halves
  float at(std::size_t p, std::size_t kk, std::size_t c) const;  // element (k kk, column c) of panel p
  std::size_t bytes() const { return panels() * k_ * kPanelCols * (bf16_ ? 2 : 4); }
  void unpack(float* out) const;  // row-major [n, k]
  std::vector<float> unpack() const;
  void row(std::size_t r, float* out) const;  // w[r, :] (k floats)

 private:
  std::size_t n_ = 0, k_ = 0;
  bool bf16_ = false;
  std::vector<float, Aligned64<float>> data_;                // f32: panels() · k · 32
  std::vector<std::uint16_t, Aligned64<std::uint16_t>> b16_;  // bf16: panels() · k · 32
};

// Another k schedule of the same GEMM (the lab's `order=SEED` and `bug:gemm_acc=N`, docs/lab.md). Default:
// the one chain over k = 0 … k-1 above. Otherwise each element's chain runs over k blocks in a given order:
//   order ≠ 0:        blocks of a drawn length (16 … 128) in a drawn order (order_blocks, salt kSaltGemmK)
//   bf16_every = N:   blocks of N (in key order unless order ≠ 0), the running sum rounded to bf16 (RNE)
//                     after every block but the last: an accumulator kept in bf16 across k tiles (a bug)
// still one chain per element (fma, continued across blocks, bias last), so every path (AVX-512 tiles, the
// generic loop, the scalar twin), every thread count and a decode row (m = 1 takes the tiled path then)
// give the same bits.
struct GemmSchedule {
  std::uint32_t order = 0;
  std::size_t bf16_every = 0;
  bool is_default() const { return order == 0 && bf16_every == 0; }
};
struct KBlock {
  std::size_t begin, len;
};
std::vector<KBlock> gemm_k_blocks(std::size_t k, const GemmSchedule& s);  // one block [0, k) by default

// y[m, n] = x[m, k] · wᵀ (+ bias[n]), x and y row-major (ld = k, n). Multi-threaded (kc::parallel_for).
void packed_gemm(const float* x, std::size_t m, const PackedMatrix& w, float* y, const float* bias = nullptr,
                 const GemmSchedule& sched = {});

// Several products of the same x (Q/K/V, gate/up): x is packed once and every op's tiles share one
// parallel region. Each op's result is bitwise the single-op packed_gemm's.
struct PackedGemmOp {
  const PackedMatrix* w;
  float* y;
  const float* bias = nullptr;
};
void packed_gemm(const float* x, std::size_t m, std::span<const PackedGemmOp> ops,
                 const GemmSchedule& sched = {});

// The scalar twin: the same fma chains with std::fma, one element at a time. Bitwise equal to packed_gemm.
void packed_gemm_scalar(const float* x, std::size_t m, const PackedMatrix& w, float* y,
                        const float* bias = nullptr, const GemmSchedule& sched = {});

}  // namespace kc::engine
