// GEMM through CBLAS (OpenBLAS) and control of its thread count. Everything GEMM-heavy in
// kernels/cpu (linear, conv2d) funnels through loom::cpu::gemm, so this is the one file
// that knows about the BLAS interface.
#include "loom/kernels/cpu.h"

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include <cblas.h>

// OpenBLAS exports these; declared here because some cblas.h variants leave them out.
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace loom::cpu {

namespace {
void call_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}
void call_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double* A,
               int lda, const double* B, int ldb, double beta, double* C) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}
}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, const T* B, T beta, T* C) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    // BLAS would only scale C; do it here so beta == 0 also clears NaNs like BLAS does.
    for (std::int64_t i = 0; i < std::int64_t(M) * N; ++i) C[i] = beta == T(0) ? T(0) : beta * C[i];
    return;
  }
  // Row-major leading dimensions: the stored row length of each operand.
  const int lda = trans_a ? M : K;
  const int ldb = trans_b ? K : N;
  call_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
            B, ldb, beta, C);
}

void set_blas_threads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

int blas_threads() { return openblas_get_num_threads(); }

template void gemm<float>(bool, bool, int, int, int, float, const float*, const float*, float, float*);
template void gemm<double>(bool, bool, int, int, int, double, const double*, const double*, double, double*);

bool flush_denormals_on_this_thread() {
#if defined(__SSE2__)
  constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero);
  return true;
#else
  return false;
#endif
}

}  // namespace loom::cpu
