// Demo: what this GPU is made of, read from the device itself, plus the two ceilings every
// chapter compares against: the FP32 FMA peak (computed from the SM count and clock) and the
// device-to-device copy bandwidth (measured here, bytes read + bytes written). Last, two
// yardsticks: cuBLAS's FP32 GEMM, what the FP32 steps chase, and cuBLAS's BF16 tensor-core
// GEMM, what the same chip does when the arithmetic runs on its tensor cores.
//   build/demo_device_query
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "cli.h"
#include "cuda_check.h"
#include "device_buffer.h"
#include "gpu_info.h"
#include "timer.h"
#include "verify.h"

int main(int argc, char** argv) {
  if (auto const exit_code = gemm::simple_command_line(
          argc, argv,
          "usage: demo_device_query\n"
          "\n"
          "Prints what this GPU is made of (SMs, clocks, registers, shared memory, L2, memory) and "
          "the\n"
          "two ceilings the chapters compare against: the FP32 FMA peak (computed) and the\n"
          "device-to-device copy bandwidth (measured), then cuBLAS's FP32 and BF16 GEMM at\n"
          "4096^3 (measured). Background: docs/01_cuda_model.md\n"))
    return *exit_code;
  if (auto const exit_code = gemm::exit_code_without_gpu("demo_device_query")) return *exit_code;
  int device = 0;
  cudaDeviceProp p{};
  gemm::check_cuda(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  auto attribute = [&](cudaDeviceAttr a) {
    int v = 0;
    gemm::check_cuda(cudaDeviceGetAttribute(&v, a, device), "cudaDeviceGetAttribute");
    return v;
  };
  int const clock_khz = attribute(cudaDevAttrClockRate);
  int const memory_clock_khz = attribute(cudaDevAttrMemoryClockRate);
  int const smem_per_sm = attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  int const smem_per_block_optin = attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  int const max_blocks_per_sm = attribute(cudaDevAttrMaxBlocksPerMultiprocessor);

  std::printf("GPU                          %s (compute capability %d.%d)\n", p.name, p.major,
              p.minor);
  std::printf("streaming multiprocessors    %d\n", p.multiProcessorCount);
  std::printf("warp size                    %d threads\n", p.warpSize);
  std::printf("threads per SM (max)         %d = %d warps\n", p.maxThreadsPerMultiProcessor,
              p.maxThreadsPerMultiProcessor / p.warpSize);
  std::printf("blocks per SM (max)          %d\n", max_blocks_per_sm);
  std::printf("threads per block (max)      %d\n", p.maxThreadsPerBlock);
  std::printf("32-bit registers per SM      %d (%d KB)\n", p.regsPerMultiprocessor,
              p.regsPerMultiprocessor * 4 / 1024);
  std::printf("registers per thread (max)   255\n");
  std::printf("shared memory per SM         %d KB\n", smem_per_sm / 1024);
  std::printf("shared memory per block      %zu KB by default, %d KB with opt-in\n",
              p.sharedMemPerBlock / 1024, smem_per_block_optin / 1024);
  std::printf("L2 cache                     %d MiB\n", p.l2CacheSize / (1024 * 1024));
  std::printf("global memory                %.1f GiB, %d-bit bus, memory clock %d MHz\n",
              p.totalGlobalMem / 1073741824.0, p.memoryBusWidth, memory_clock_khz / 1000);
  std::printf("peak SM clock                %d MHz\n", clock_khz / 1000);

  // FP32: 128 FMA lanes per SM on sm_80 and later (4 sub-partitions x 32), 2 FLOP per FMA.
  double const fp32_peak = p.multiProcessorCount * 128.0 * 2.0 * clock_khz * 1e3;
  // Memory: double data rate on a bus of memoryBusWidth bits.
  double const memory_peak = 2.0 * memory_clock_khz * 1e3 * p.memoryBusWidth / 8.0;
  std::printf("FP32 peak (computed)         %.1f TFLOP/s = %d SMs x 128 lanes x 2 x %.2f GHz\n",
              fp32_peak / 1e12, p.multiProcessorCount, clock_khz / 1e6);
  std::printf("memory bandwidth (computed)  %.0f GB/s = 2 x %d MHz x %d bits / 8\n",
              memory_peak / 1e9, memory_clock_khz / 1000, p.memoryBusWidth);

  // Measured: a 1 GiB device-to-device copy, median of 21.
  std::size_t const bytes = std::size_t(1) << 30;
  void* src = nullptr;
  void* dst = nullptr;
  gemm::check_cuda(cudaMalloc(&src, bytes), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&dst, bytes), "cudaMalloc");
  gemm::check_cuda(cudaMemset(src, 1, bytes), "cudaMemset");
  gemm::EventTimer timer(nullptr);
  auto copy = [&] {
    gemm::check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy");
  };
  double const copy_bandwidth = 2.0 * bytes / (gemm::median_time_ms(timer, copy, 3, 21) * 1e-3);
  std::printf(
      "copy bandwidth (measured)    %.0f GB/s (cudaMemcpy device to device, 1 GiB, read + write, "
      "median of 21)\n",
      copy_bandwidth / 1e9);
  std::printf(
      "machine balance              %.1f FLOP per byte (FP32 peak / measured copy bandwidth)\n",
      fp32_peak / copy_bandwidth);
  cudaFree(src);
  cudaFree(dst);

  // cuBLAS at 4096^3 on random inputs in [-1, 1], row-major C = A B called as column-major
  // C^T = B^T A^T (docs/08_column_major.md), median of 21 after 3 warm-up runs.
  int const n = 4096;
  gemm::MatrixLayout const square{n, n, n, 0, 0};
  gemm::Random random(2026);
  gemm::HostMatrix a(square), b(square);
  gemm::fill_random(a, random);
  gemm::fill_random(b, random);
  cublasHandle_t handle = nullptr;
  gemm::check_cublas(cublasCreate(&handle), "cublasCreate");
  double const flops = 2.0 * n * double(n) * n;
  float const alpha = 1.0f, beta = 0.0f;
  {
    gemm::DeviceMatrix<float> da(a), db(b), dc(a);
    gemm::check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    auto sgemm = [&] {
      gemm::check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, db.data(),
                                     n, da.data(), n, &beta, dc.data(), n),
                         "cublasSgemm");
    };
    double const ms = gemm::median_time_ms(timer, sgemm, 3, 21);
    std::printf(
        "cuBLAS SGEMM 4096^3          %.1f TFLOP/s (FP32 on the CUDA cores, TF32 not "
        "allowed; %.3f ms)\n",
        flops / (ms * 1e-3) / 1e12, ms);
  }
  {
    // The same values rounded to bf16 (the device copy must hold exactly the host's values).
    for (auto* matrix : {&a, &b}) {
      for (float& x : matrix->data)
        x = gemm::round_to(gemm::Element::bf16, x);
    }
    gemm::DeviceMatrix<__nv_bfloat16> da(a), db(b), dc(a);
    auto bf16_gemm = [&] {
      gemm::check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, db.data(),
                                      CUDA_R_16BF, n, da.data(), CUDA_R_16BF, n, &beta, dc.data(),
                                      CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         "cublasGemmEx");
    };
    double const ms = gemm::median_time_ms(timer, bf16_gemm, 3, 21);
    std::printf(
        "cuBLAS BF16 GEMM 4096^3      %.1f TFLOP/s (BF16 in and out, FP32 accumulation, "
        "tensor cores; %.3f ms)\n",
        flops / (ms * 1e-3) / 1e12, ms);
  }
  cublasDestroy(handle);
  return 0;
}
