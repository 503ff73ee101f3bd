// Demo: coalescing and vectorized access, measured with the simplest memory-bound kernel there
// is, a copy. Every number is bytes moved (read + written) per second, and its percentage of a
// cudaMemcpy device-to-device copy measured in the same process.
//   build/demo_copy_bandwidth
//
// Three experiments on 1 GiB buffers (far larger than the L2, so this is DRAM):
//   1. access width: each thread copies elements of 1, 2, 4, 8 or 16 bytes;
//   2. block size, for 4- and 16-byte elements;
//   3. the access pattern of a warp: consecutive elements, 4 bytes off alignment, and strided
//      (a warp reads every s-th float, so each 32-byte sector it fetches holds fewer useful
//      bytes).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "cli.h"
#include "cuda_check.h"
#include "gpu_info.h"
#include "timer.h"

namespace {

constexpr std::size_t kBytes = std::size_t(1) << 30;

// Grid-stride copy of n elements of type T.
template <typename T>
__global__ void copy_kernel(T const* __restrict__ src, T* __restrict__ dst, std::size_t n) {
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
}

// Copies every `step`-th float: thread i moves element i * step. Useful bytes: n / step floats.
__global__ void strided_copy_kernel(float const* __restrict__ src, float* __restrict__ dst,
                                    std::size_t n, int step) {
  std::size_t const count = n / step;
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    dst[i * step] = src[i * step];
  }
}

struct Context {
  char* src = nullptr;
  char* dst = nullptr;
  int sms = 0;
  double peak = 0.0;  // measured cudaMemcpy bandwidth, bytes/s
  gemm::EventTimer* timer = nullptr;
};

template <typename Launch>
double bandwidth(Context const& ctx, double bytes_moved, Launch&& launch) {
  return bytes_moved / (gemm::median_time_ms(*ctx.timer, launch, 3, 15) * 1e-3);
}

void print(char const* what, double bytes_per_second, double peak) {
  std::printf("  %-44s %8.0f GB/s  %5.1f%% of cudaMemcpy\n", what, bytes_per_second / 1e9,
              100.0 * bytes_per_second / peak);
}

// One wave of resident blocks; the grid-stride loop does the rest.
int grid_for(Context const& ctx, int block) {
  return ctx.sms * (2048 / block);
}

template <typename T>
double width_run(Context const& ctx, int block, std::size_t offset_bytes = 0) {
  std::size_t const n = (kBytes - 64) / sizeof(T);
  auto const* src = reinterpret_cast<T const*>(ctx.src + offset_bytes);
  auto* dst = reinterpret_cast<T*>(ctx.dst + offset_bytes);
  return bandwidth(ctx, 2.0 * n * sizeof(T),
                   [&] { copy_kernel<T><<<grid_for(ctx, block), block>>>(src, dst, n); });
}

}  // namespace

int main(int argc, char** argv) {
  if (auto const exit_code =
          gemm::simple_command_line(argc, argv,
                                    "usage: demo_copy_bandwidth\n"
                                    "\n"
                                    "Copies 1 GiB buffers with 1- to 16-byte accesses, several "
                                    "block sizes, misaligned and strided\n"
                                    "warps, and prints each rate as a percentage of a cudaMemcpy "
                                    "copy measured in the same run.\n"
                                    "Background: docs/02_coalescing_and_vectors.md\n"))
    return *exit_code;
  Context ctx;
  if (auto const exit_code = gemm::exit_code_without_gpu("demo_copy_bandwidth")) return *exit_code;
  gemm::check_cuda(cudaDeviceGetAttribute(&ctx.sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  gemm::check_cuda(cudaMalloc(&ctx.src, kBytes), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&ctx.dst, kBytes), "cudaMalloc");
  gemm::check_cuda(cudaMemset(ctx.src, 1, kBytes), "cudaMemset");
  gemm::EventTimer timer(nullptr);
  ctx.timer = &timer;
  ctx.peak = bandwidth(ctx, 2.0 * kBytes, [&] {
    gemm::check_cuda(cudaMemcpyAsync(ctx.dst, ctx.src, kBytes, cudaMemcpyDeviceToDevice), "memcpy");
  });
  std::printf("cudaMemcpy device to device, 1 GiB: %.0f GB/s (read + write); the 100%% below\n\n",
              ctx.peak / 1e9);

  std::printf("1. access width (256 threads per block, one wave of blocks, grid-stride loop)\n");
  print("1 byte per thread (uint8_t)", width_run<std::uint8_t>(ctx, 256), ctx.peak);
  print("2 bytes per thread (uint16_t)", width_run<std::uint16_t>(ctx, 256), ctx.peak);
  print("4 bytes per thread (float)", width_run<float>(ctx, 256), ctx.peak);
  print("8 bytes per thread (float2)", width_run<float2>(ctx, 256), ctx.peak);
  print("16 bytes per thread (float4)", width_run<float4>(ctx, 256), ctx.peak);

  std::printf("\n2. block size (one wave of blocks)\n");
  for (int block : {32, 64, 128, 256, 512, 1024}) {
    char what[64];
    std::snprintf(what, sizeof what, "float,  %4d threads per block", block);
    print(what, width_run<float>(ctx, block), ctx.peak);
  }
  for (int block : {32, 64, 128, 256, 512, 1024}) {
    char what[64];
    std::snprintf(what, sizeof what, "float4, %4d threads per block", block);
    print(what, width_run<float4>(ctx, block), ctx.peak);
  }

  std::printf("\n3. access pattern of a warp (float, 256 threads per block)\n");
  print("consecutive, 128-byte aligned", width_run<float>(ctx, 256), ctx.peak);
  print("consecutive, 4 bytes off alignment", width_run<float>(ctx, 256, 4), ctx.peak);
  std::size_t const n = kBytes / sizeof(float);
  for (int step : {2, 4, 8, 16, 32}) {
    double const useful = 2.0 * (n / step) * sizeof(float);
    double const bw = bandwidth(ctx, useful, [&] {
      strided_copy_kernel<<<grid_for(ctx, 256), 256>>>(reinterpret_cast<float const*>(ctx.src),
                                                       reinterpret_cast<float*>(ctx.dst), n, step);
    });
    char what[64];
    std::snprintf(what, sizeof what, "every %2d-th float (useful bytes only)", step);
    print(what, bw, ctx.peak);
  }
  cudaFree(ctx.src);
  cudaFree(ctx.dst);
  return 0;
}
