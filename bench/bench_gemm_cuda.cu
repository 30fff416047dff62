// GEMM rate of Loom's CUDA backend against cuBLAS's best for the same shape, on GPU 0.
// For each GEMM the example models run (forward, input gradient and weight gradient of the
// default MLP's and CNN's layers at batch 64; the CNN's convolutions as the batched GEMMs
// BodyBackend issues), it times:
//  - Loom: the cublasSgemm call BodyBackend makes (gemm_call's descriptor, default algo),
//  - the peer: cublasGemmEx with the same operands under every algorithm cuBLAS offers
//    (CUBLAS_GEMM_DEFAULT and ALGO0..23), keeping the fastest: "cuBLAS's best".
// Prints one JSON line per shape with TFLOP/s of each and Loom / best (target >= 0.70).
// Each figure is the median of --repeats timed batches of --iters calls (CUDA events).
//   bench_gemm_cuda [--iters 50] [--repeats 7] [--tf32]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom/cuda/gemm_descriptor.h"

namespace {

struct Shape {
  const char* what;
  bool trans_a, trans_b;
  int M, N, K;
};

// Row-major C[M,N] = op(A) op(B) as BodyBackend issues it (body_backend.h).
const std::vector<Shape> kShapes = {
    {"mlp fc1 forward", false, true, 64, 256, 784},     {"mlp fc1 dW", true, false, 256, 784, 64},
    {"mlp fc2 forward", false, true, 64, 128, 256},     {"mlp fc2 dx", false, false, 64, 256, 128},
    {"cnn conv1 forward", false, false, 16, 64 * 784, 9},  {"cnn conv2 forward", false, false, 32, 64 * 196, 144},
    {"cnn conv2 dW", false, true, 32, 144, 64 * 196},    {"cnn conv2 dcol", true, false, 144, 64 * 196, 32},
    {"cnn fc1 forward", false, true, 64, 128, 1568},    {"large square (reference)", false, false, 4096, 4096, 4096},
};

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "bench_gemm_cuda: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

template <class Call>
double median_ms(int iters, int repeats, Call call) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) call();  // warm-up
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    check(cudaEventRecord(start), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) call();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    ms.push_back(double(elapsed) / iters);
  }
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 50, repeats = 7;
  bool tf32 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (a == "--tf32") tf32 = true;
    else {
      std::fprintf(stderr, "usage: bench_gemm_cuda [--iters N] [--repeats R] [--tf32]\n");
      return 2;
    }
  }
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench_gemm_cuda: cublasCreate failed (no GPU or driver?)\n");
    return 1;
  }
  cublasSetMathMode(blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  for (const Shape& s : kShapes) {
    const loom::cuda::GemmCall c = loom::cuda::gemm_call(s.trans_a, s.trans_b, s.M, s.N, s.K);
    float *A, *B, *C;
    check(cudaMalloc(&A, sizeof(float) * std::size_t(s.M) * s.K), "cudaMalloc");
    check(cudaMalloc(&B, sizeof(float) * std::size_t(s.K) * s.N), "cudaMalloc");
    check(cudaMalloc(&C, sizeof(float) * std::size_t(s.M) * s.N), "cudaMalloc");
    check(cudaMemset(A, 0, sizeof(float) * std::size_t(s.M) * s.K), "cudaMemset");
    check(cudaMemset(B, 0, sizeof(float) * std::size_t(s.K) * s.N), "cudaMemset");
    const float one = 1.0f, zero = 0.0f;
    const cublasOperation_t op_first = c.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = c.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    const double loom_ms = median_ms(iters, repeats, [&] {
      cublasSgemm(blas, op_first, op_second, c.m, c.n, c.k, &one, B, c.ld_first, A, c.ld_second, &zero, C, c.ldc);
    });
    double best_ms = 1e30;
    int best_algo = -100;
    for (int algo = int(CUBLAS_GEMM_DEFAULT); algo <= int(CUBLAS_GEMM_ALGO23); ++algo) {
      auto call = [&] {
        return cublasGemmEx(blas, op_first, op_second, c.m, c.n, c.k, &one, B, CUDA_R_32F, c.ld_first, A, CUDA_R_32F,
                            c.ld_second, &zero, C, CUDA_R_32F, c.ldc, compute, cublasGemmAlgo_t(algo));
      };
      if (call() != CUBLAS_STATUS_SUCCESS) continue;  // an algorithm this shape or GPU lacks
      const double ms = median_ms(iters, repeats, call);
      if (ms < best_ms) best_ms = ms, best_algo = algo;
    }
    const double flop = 2.0 * s.M * s.N * s.K;
    std::printf("{\"gemm\": \"%s\", \"M\": %d, \"N\": %d, \"K\": %d, \"tf32\": %s, \"loom_tflops\": %.3f, "
                "\"cublas_best_tflops\": %.3f, \"best_algo\": %d, \"loom_over_best\": %.3f}\n",
                s.what, s.M, s.N, s.K, tf32 ? "true" : "false", flop / loom_ms * 1e-9, flop / best_ms * 1e-9,
                best_algo, best_ms / loom_ms);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
  }
  cublasDestroy(blas);
  return 0;
}
