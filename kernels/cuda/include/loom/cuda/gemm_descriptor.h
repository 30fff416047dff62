// Loom's matrices are row-major; cuBLAS is column-major. A row-major matrix read as
// column-major is its transpose, so the row-major product C = op(A) op(B) is computed as
// the column-major product C^T = op(B)^T op(A)^T: B goes first, A second, and m and n
// swap. This pure function makes that call's arguments (the ones a wrong transpose or
// leading dimension would spoil), so a test can hand the same description to CBLAS in
// column-major order on the CPU and compare with the reference product: the cuBLAS call
// site (gemm.cu) only copies these fields into cublasSgemm.
#pragma once

namespace loom::cuda {

struct GemmCall {
  bool trans_first = false, trans_second = false;  // op of the first / second operand (B, A)
  int m = 0, n = 0, k = 0;                          // column-major C is m x n
  int ld_first = 0, ld_second = 0, ldc = 0;
};

// C[M, N] = op(A) op(B), row-major; op(A) is [M, K] (A is [K, M] when trans_a), op(B) is
// [K, N] (B is [N, K] when trans_b).
constexpr GemmCall gemm_call(bool trans_a, bool trans_b, int M, int N, int K) {
  GemmCall c;
  c.trans_first = trans_b;
  c.trans_second = trans_a;
  c.m = N;
  c.n = M;
  c.k = K;
  c.ld_first = trans_b ? K : N;   // B's row length
  c.ld_second = trans_a ? M : K;  // A's row length
  c.ldc = N;
  return c;
}

}  // namespace loom::cuda
