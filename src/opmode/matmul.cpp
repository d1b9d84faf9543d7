// matmul: c[M, N] = a[M, K] · b[K, N]. Reference in f64; candidates model a GEMM's accumulator precision.
#include <vector>

#include "core/parallel.h"
#include "opmode/op_util.h"

namespace kc::ops {
namespace {

struct Dims {
  std::size_t m, k, n;
};
Dims dims(std::span<const Array> in) {
  return {static_cast<std::size_t>(in[0].shape[0]), static_cast<std::size_t>(in[0].shape[1]),
          static_cast<std::size_t>(in[1].shape[1])};
}

// One output row per task; within a row every c[i, j] accumulates over k in order (c += a[i,k]·b[k,:]
// vectorises over j without changing any element's summation order).
template <typename Acc>
Array matmul_acc(std::span<const Array> in, DType acc_round) {
  const Dims dm = dims(in);  // not a structured binding: clang < 16 cannot capture those
  const std::size_t m = dm.m, k = dm.k, n = dm.n;
  Array c{{static_cast<std::int64_t>(m), static_cast<std::int64_t>(n)}, std::vector<double>(m * n)};
  const double* a = in[0].values.data();
  std::vector<Acc> b(in[1].values.begin(), in[1].values.end());
  parallel_for(m, 4, [&](std::size_t, std::size_t r0, std::size_t r1) {
    std::vector<Acc> row(n);
    for (std::size_t i = r0; i < r1; ++i) {
      std::fill(row.begin(), row.end(), Acc(0));
      for (std::size_t kk = 0; kk < k; ++kk) {
        Acc aik = static_cast<Acc>(a[i * k + kk]);
        const Acc* bk = b.data() + kk * n;
        for (std::size_t j = 0; j < n; ++j) row[j] += aik * bk[j];
        if (acc_round != DType::float64 && acc_round != DType::float32)
          for (auto& v : row) v = static_cast<Acc>(round_to(acc_round, static_cast<double>(v)));
      }
      for (std::size_t j = 0; j < n; ++j) c.values[i * n + j] = static_cast<double>(row[j]);
    }
  });
  return c;
}

}  // namespace

void register_matmul(Registry& r) {
  OpDef d;
  d.name = "matmul";
  d.summary = "c = a·b; inputs bf16, candidates differ in the accumulator";
  d.input_names = {"a [M, K]", "b [K, N]"};
  d.output_shape = [](std::span<const Shape> s, const Params&) {
    expect_inputs("matmul", s, 2, "a MxK; b KxN");
    expect_rank("matmul", "a", s[0], 2, "MxK");
    expect_rank("matmul", "b", s[1], 2, "KxN");
    if (s[1][0] != s[0][1]) shape_error("matmul", "b", fmt::format("{}xN (K of a)", s[0][1]), s[1]);
    return Shape{s[0][0], s[1][1]};
  };
  d.input_dtype = DType::bfloat16;
  d.default_output = DType::bfloat16;
  d.reference = [](std::span<const Array> in, const Params&) {
    return matmul_acc<double>(in, DType::float64);
  };
  r.add_op(std::move(d));
  r.add_candidate(
      "matmul", "f32acc", [](auto in, auto&, DType) { return matmul_acc<float>(in, DType::float32); },
      "f32 accumulation in k order (a tensor-core GEMM without split-K)");
  r.add_candidate(
      "matmul", "bf16acc", [](auto in, auto&, DType) { return matmul_acc<float>(in, DType::bfloat16); },
      "accumulator rounded to bf16 after every k step (a broken kernel)");
}

}  // namespace kc::ops
