// Measures this machine's SGEMM rate through cblas_sgemm (OpenBLAS) with a given thread
// count: square sizes 256..2048 and the shapes an MLP step on Fashion-MNIST issues. The
// best rate is the "peak" that Loom's GEMM-heavy layers are judged against (target: >= 70%).
//
//   GFLOP/s = 2 * M * N * K / seconds / 1e9   (one multiply and one add per inner-product term)
//
// Usage: bench_sgemm [--threads N] [--min-time SECONDS]
// Prints one line per shape, then "peak", then one JSON line for scripts.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Shape {
  const char* what;
  int m, n, k;
  bool trans_a;  // backward weight gradients multiply by a transposed operand
};

// Row-major as Loom stores tensors. The MLP shapes are for batch 64 on 784-256-128-10:
// forward Y = X W^T, weight gradient dW = dY^T X, input gradient dX = dY W.
const std::vector<Shape> kShapes = {
    {"square", 256, 256, 256, false},
    {"square", 512, 512, 512, false},
    {"square", 1024, 1024, 1024, false},
    {"square", 2048, 2048, 2048, false},
    {"mlp fwd 784->256", 64, 256, 784, false},
    {"mlp fwd 256->128", 64, 128, 256, false},
    {"mlp fwd 128->10", 64, 10, 128, false},
    {"mlp dW 256x784", 256, 784, 64, true},
    {"mlp dX 64x784", 64, 784, 256, false},
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best of three timed rounds, each repeating the call for at least min_time seconds: the
// best round is the least disturbed by other processes on a shared machine.
double measure_gflops(const Shape& s, double min_time) {
  std::vector<float> a(static_cast<std::size_t>(s.m) * s.k), b(static_cast<std::size_t>(s.k) * s.n),
      c(static_cast<std::size_t>(s.m) * s.n, 0.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) * 0.01f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.01f;
  const auto ta = s.trans_a ? CblasTrans : CblasNoTrans;
  const int lda = s.trans_a ? s.m : s.k;
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), s.n, 0.0f,
                c.data(), s.n);
  };
  call();  // warm up: thread pool start, page faults, caches
  const double flops = 2.0 * s.m * s.n * s.k;
  double best = 0.0;
  for (int round = 0; round < 3; ++round) {
    long reps = 0;
    const double start = now_s();
    double elapsed = 0.0;
    do {
      call();
      ++reps;
      elapsed = now_s() - start;
    } while (elapsed < min_time);
    best = std::max(best, flops * static_cast<double>(reps) / elapsed / 1e9);
  }
  return best;
}

void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--threads N] [--min-time SECONDS]\n", argv0);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double min_time = 0.2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else {
      usage(argv[0]);
    }
  }
  if (threads < 1 || min_time <= 0.0) usage(argv[0]);
  openblas_set_num_threads(threads);
  std::printf("SGEMM through cblas_sgemm, %d thread(s); GFLOP/s = 2*M*N*K / s / 1e9\n", threads);
  std::printf("%-20s %6s %6s %6s %10s\n", "shape", "M", "N", "K", "GFLOP/s");
  double peak = 0.0;
  std::string json = "{\"threads\":" + std::to_string(threads) + ",\"shapes\":[";
  for (std::size_t i = 0; i < kShapes.size(); ++i) {
    const Shape& s = kShapes[i];
    const double gflops = measure_gflops(s, min_time);
    peak = std::max(peak, gflops);
    std::printf("%-20s %6d %6d %6d %10.1f\n", s.what, s.m, s.n, s.k, gflops);
    char entry[160];
    std::snprintf(entry, sizeof entry, "%s{\"what\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"gflops\":%.2f}", i ? "," : "",
                  s.what, s.m, s.n, s.k, gflops);
    json += entry;
  }
  std::printf("peak: %.1f GFLOP/s (%d thread(s))\n", peak, threads);
  char tail[64];
  std::snprintf(tail, sizeof tail, "],\"peak_gflops\":%.2f}", peak);
  std::printf("%s%s\n", json.c_str(), tail);
  return 0;
}
