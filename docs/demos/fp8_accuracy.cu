// Demo for the FP8 steps (29 on): how the tensor cores add FP8 products, how accurate the step is
// beside cuBLASLt with fast accumulation on and off, and how fast.
//
//   build/fp8_accuracy_NN_name [probe|accuracy|speed|all]      (default: all)
//
// probe: C = 1 + s - 1 for one row and column, with the small product s = 2^-e placed in the
// same wgmma as the 1 and the -1, or in a wgmma of its own; and 31 ones + s, then 31 minus ones.
// Exact C is s; the tensor cores return 0 where they cut s off. It shows how many bits below the
// leading bit of the running sum an addition keeps.
// accuracy: M = N = 256, K = 256 to 65,536; A and B uniform in [-1, 1) rounded to e4m3, scales
// 0.5 and 4 (the harness's); the error of each element of C relative to its scaled sum of
// |a_ip| |b_pj| against a float64 reference (cublasDgemm), the largest and the median over C, for
// the step and for cuBLASLt with fast accumulation on and off.
// speed: TFLOP/s at six shapes, the median of 11 calls after 3 warm-up calls, CUDA events on one
// stream, the step and both cuBLASLt modes one after the other per shape.
//
// Progress goes to stderr; stdout has Markdown tables and lines to parse (csv,...).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "device_buffer.h"
#include "gemm.h"
#include "gpu_info.h"
#include "gpu_reference.h"
#include "precision.h"
#include "timer.h"

namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
using gemm::DeviceBuffer;

constexpr float kAScale = gemm::Fp8::a_scale;
constexpr float kBScale = gemm::Fp8::b_scale;

// Uniform in [-1, 1), rounded to e4m3, from a hash of the index: the same matrix on every run.
__global__ void fill_kernel(fp8* data, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    data[i] = fp8(static_cast<float>(z >> 40) * 0x1p-23f - 1.0f);
  }
}

enum class Method { step, lt_fast, lt_slow };
char const* const kMethodNames[] = {"step", "cuBLASLt fast accumulation", "cuBLASLt"};

// C = A B^T scaled, with A m x k and B n x k dense; false where cuBLASLt offers nothing.
bool multiply(Method method, int m, int n, int k, fp8 const* A, fp8 const* B, bf16* C,
              cudaStream_t stream) {
  float const* scales = gemm::fp8_device_scales(kAScale, kBScale);
  if (method == Method::step) {
    gemm::fp8_gemm(m, n, k, 1.0f, A, k, B, k, scales, scales + 4, 0.0f, C, n, stream);
    return true;
  }
  return gemm::cublaslt_fp8_gemm(stream, m, n, k, 1.0f, A, k, B, k, scales, scales + 4, 0.0f, C, n,
                                 method == Method::lt_fast);
}

float bf16_value(bf16 x) {
  return __bfloat162float(x);
}

void run_probe(cudaStream_t stream) {
  int const k = 128;
  DeviceBuffer<fp8> A(k), B(k);
  DeviceBuffer<bf16> C(8);
  auto result = [&](std::vector<float> const& a, std::vector<float> const& b) {
    std::vector<fp8> ha(k, fp8(0.0f)), hb(k, fp8(0.0f));
    for (std::size_t i = 0; i < a.size(); ++i) {
      ha[i] = fp8(a[i]);
      hb[i] = fp8(b[i]);
    }
    gemm::check_cuda(cudaMemcpy(A.get(), ha.data(), k, cudaMemcpyHostToDevice), "cudaMemcpy");
    gemm::check_cuda(cudaMemcpy(B.get(), hb.data(), k, cudaMemcpyHostToDevice), "cudaMemcpy");
    multiply(Method::step, 1, 1, k, A.get(), B.get(), C.get(), stream);
    bf16 c;
    gemm::check_cuda(cudaMemcpy(&c, C.get(), sizeof c, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return bf16_value(c) / (kAScale * kBScale);
  };
  std::printf("probe: exact C is s = 2^-e; 0 where the tensor cores cut s off\n\n");
  std::printf(
      "| e | 1 + s - 1, one wgmma | 1, s, -1 in three wgmma | s, 1, -1 in three wgmma "
      "| 31 ones + s, then 31 minus ones |\n|---:|---:|---:|---:|---:|\n");
  for (int e = 6; e <= 16; ++e) {
    // s as a product of two e4m3 values (each at least 2^-9).
    float const sa = std::ldexp(1.0f, -std::min(e, 9));
    float const sb = std::ldexp(1.0f, -(e - std::min(e, 9)));
    std::vector<float> a(k, 0.0f), b(k, 0.0f);
    a = {1.0f, sa, -1.0f};
    b = {1.0f, sb, 1.0f};
    float const same = result(a, b);
    a.assign(k, 0.0f);
    b.assign(k, 0.0f);
    a[0] = 1.0f, b[0] = 1.0f, a[32] = sa, b[32] = sb, a[64] = -1.0f, b[64] = 1.0f;
    float const apart = result(a, b);
    a.assign(k, 0.0f);
    b.assign(k, 0.0f);
    a[0] = sa, b[0] = sb, a[32] = 1.0f, b[32] = 1.0f, a[64] = -1.0f, b[64] = 1.0f;
    float const small_first = result(a, b);
    a.assign(k, 0.0f);
    b.assign(k, 0.0f);
    for (int i = 0; i < 31; ++i)
      a[i] = 1.0f, b[i] = 1.0f, a[32 + i] = -1.0f, b[32 + i] = 1.0f;
    a[31] = sa, b[31] = sb;
    float const after_31 = result(a, b);
    std::printf("| %d | %g | %g | %g | %g |\n", e, same, apart, small_first, after_31);
    std::printf("csv,probe,%d,%g,%g,%g,%g\n", e, same, apart, small_first, after_31);
  }
  std::printf("\n");
}

void run_accuracy(cublasHandle_t handle, cudaStream_t stream) {
  int const mn = 256;
  std::printf(
      "accuracy: M = N = %d; |c - ref| / (a_scale b_scale sum_p |a_ip| |b_pj|), the "
      "largest and the median over C\n\n| K | step max | step median | %s max | %s "
      "median | %s max | %s median |\n|---:|---:|---:|---:|---:|---:|---:|\n",
      mn, kMethodNames[1], kMethodNames[1], kMethodNames[2], kMethodNames[2]);
  for (int k : {256, 1024, 4096, 16384, 65536}) {
    std::fprintf(stderr, "accuracy: K = %d\n", k);
    std::size_t const count = static_cast<std::size_t>(mn) * k;
    DeviceBuffer<fp8> A(count), B(count);
    fill_kernel<<<512, 256, 0, stream>>>(A.get(), count, 1000 + k);
    fill_kernel<<<512, 256, 0, stream>>>(B.get(), count, 2000 + k);
    // The float64 reference of A B^T (B given as n x k), unscaled: the scales multiply both the
    // result and the magnitude, and cancel in the relative error.
    gemm::MatrixLayout const layout{mn, k, k, 0, 0};
    gemm::MatrixLayout const c_layout{mn, mn, mn, 0, 0};
    gemm::ReferenceSums const reference =
        gemm::reference_sums_gpu(handle, 1.0, A.get(), layout, B.get(), layout, 0.0f,
                                 static_cast<bf16 const*>(nullptr), c_layout, true);
    std::vector<double> const& value = reference.value;
    std::vector<double> const& magnitude = reference.magnitude;
    std::printf("| %d ", k);
    for (Method method : {Method::step, Method::lt_fast, Method::lt_slow}) {
      DeviceBuffer<bf16> C(static_cast<std::size_t>(mn) * mn);
      if (!multiply(method, mn, mn, k, A.get(), B.get(), C.get(), stream)) {
        std::printf("| n/a | n/a ");
        continue;
      }
      std::vector<bf16> c(static_cast<std::size_t>(mn) * mn);
      gemm::check_cuda(
          cudaMemcpy(c.data(), C.get(), c.size() * sizeof(bf16), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
      double const scale = static_cast<double>(kAScale) * kBScale;
      std::vector<double> error(c.size());
      for (std::size_t i = 0; i < c.size(); ++i)
        error[i] = std::fabs(bf16_value(c[i]) - scale * value[i]) / (scale * magnitude[i]);
      double const largest = *std::max_element(error.begin(), error.end());
      std::nth_element(error.begin(), error.begin() + error.size() / 2, error.end());
      std::printf("| %.2e | %.2e ", largest, error[error.size() / 2]);
      std::fprintf(stderr, "csv,accuracy,%d,%s,%.3e,%.3e\n", k, kMethodNames[int(method)], largest,
                   error[error.size() / 2]);
    }
    std::printf("|\n");
  }
  std::printf("\n");
}

void run_speed(cudaStream_t stream) {
  struct Shape {
    int m, n, k;
  };
  std::printf(
      "speed: TFLOP/s (2 M N K / time), median of 11 calls after 3 warm-up calls\n\n"
      "| M x N x K | step | %s | %s | step / fast | step / cuBLASLt |\n"
      "|---|---:|---:|---:|---:|---:|\n",
      kMethodNames[1], kMethodNames[2]);
  gemm::EventTimer timer(stream);
  for (Shape const s :
       {Shape{4096, 4096, 4096}, Shape{8192, 8192, 8192}, Shape{1000, 3000, 2000},
        Shape{8192, 8192, 1024}, Shape{4096, 14336, 4096}, Shape{2048, 2048, 2048}}) {
    std::fprintf(stderr, "speed: %dx%dx%d\n", s.m, s.n, s.k);
    DeviceBuffer<fp8> A(static_cast<std::size_t>(s.m) * s.k),
        B(static_cast<std::size_t>(s.n) * s.k);
    DeviceBuffer<bf16> C(static_cast<std::size_t>(s.m) * s.n);
    fill_kernel<<<512, 256, 0, stream>>>(A.get(), static_cast<std::size_t>(s.m) * s.k, 1);
    fill_kernel<<<512, 256, 0, stream>>>(B.get(), static_cast<std::size_t>(s.n) * s.k, 2);
    double tflops[3] = {NAN, NAN, NAN};
    for (Method method : {Method::step, Method::lt_fast, Method::lt_slow}) {
      if (!multiply(method, s.m, s.n, s.k, A.get(), B.get(), C.get(), stream)) continue;
      double const ms = gemm::median_time_ms(
          timer, [&] { multiply(method, s.m, s.n, s.k, A.get(), B.get(), C.get(), stream); }, 3,
          11);
      tflops[int(method)] = 2.0 * s.m * s.n * s.k / (ms * 1e9);
      std::fprintf(stderr, "csv,speed,%dx%dx%d,%s,%.4f\n", s.m, s.n, s.k, kMethodNames[int(method)],
                   ms);
    }
    std::printf("| %dx%dx%d | %.1f | %.1f | %.1f | %.3f | %.3f |\n", s.m, s.n, s.k, tflops[0],
                tflops[1], tflops[2], tflops[0] / tflops[1], tflops[0] / tflops[2]);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string const mode = argc > 1 ? argv[1] : "all";
  if (mode != "probe" && mode != "accuracy" && mode != "speed" && mode != "all") {
    std::fprintf(stderr, "usage: %s [probe|accuracy|speed|all]\n", argv[0]);
    return 2;
  }
  if (auto const missing = gemm::why_no_gpu()) {
    std::fprintf(stderr, "fp8_accuracy: %s: skipped\n", missing->c_str());
    return 77;
  }
  if (auto const why = gemm::why_not_sm90a()) {
    std::fprintf(stderr, "fp8_accuracy: %s: skipped\n", why->c_str());
    return 77;
  }
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
  gemm::check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  gemm::check_cublas(cublasCreate(&handle), "cublasCreate");
  gemm::check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  std::printf("%s\n%s\n\n", gemm::describe_gpu(0).c_str(), gemm::describe_software().c_str());
  if (mode == "probe" || mode == "all") run_probe(stream);
  if (mode == "accuracy" || mode == "all") run_accuracy(handle, stream);
  if (mode == "speed" || mode == "all") run_speed(stream);
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  return 0;
}
