// Demo: summing 64 Mi floats (256 MiB, several times the L2), three ways.
//   build/demo_reduction
//
//   1. shared-memory tree: one element per thread, a block halves its partial sums in shared
//      memory with a barrier per level (log2(256) = 8 barriers), one atomic per block;
//   2. warp shuffle: each thread first sums many elements (a grid-stride loop: the thread
//      level), a warp combines its 32 sums with 5 __shfl_down_sync steps (the warp level),
//      one shared-memory exchange and one more shuffle combine the warps (the block level),
//      and one atomic per block adds to the result;
//   3. as 2, with 16-byte (float4) loads.
// Each is compared with the bandwidth of a device-to-device copy measured in the same process
// (reading is half of a copy's traffic, so a reduction at 100% "of copy" moves bytes as fast as
// the copy does), and its result with a float64 sum on the CPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "cli.h"
#include "cuda_check.h"
#include "gpu_info.h"
#include "timer.h"
#include "verify.h"

namespace {

constexpr int kBlock = 256;

__global__ void reduce_shared_tree(float const* __restrict__ x, std::size_t n, float* result) {
  __shared__ float partial[kBlock];
  std::size_t const i = blockIdx.x * static_cast<std::size_t>(kBlock) + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(result, partial[0]);
}

// The 32 values of a warp, summed; lane 0 holds the total.
__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// The block's values, summed: warps first, then the first warp over the warp totals.
__device__ void block_sum_to(float v, float* result) {
  __shared__ float warp_totals[kBlock / 32];
  int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < kBlock / 32 ? warp_totals[lane] : 0.0f);
    if (lane == 0) atomicAdd(result, v);
  }
}

__global__ void reduce_shuffle(float const* __restrict__ x, std::size_t n, float* result) {
  float v = 0.0f;
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * kBlock;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kBlock) + threadIdx.x; i < n;
       i += stride)
    v += x[i];
  block_sum_to(v, result);
}

__global__ void reduce_shuffle_float4(float4 const* __restrict__ x, std::size_t n4, float* result) {
  float v = 0.0f;
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * kBlock;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kBlock) + threadIdx.x; i < n4;
       i += stride) {
    float4 const q = x[i];
    v += (q.x + q.y) + (q.z + q.w);
  }
  block_sum_to(v, result);
}

}  // namespace

int main(int argc, char** argv) {
  if (auto const exit_code =
          gemm::simple_command_line(argc, argv,
                                    "usage: demo_reduction\n"
                                    "\n"
                                    "Sums 64 Mi floats three ways (shared-memory tree, warp "
                                    "shuffles, shuffles with float4 loads)\n"
                                    "and compares each with the copy rate and a float64 sum. "
                                    "Background: docs/04_reduction.md\n"))
    return *exit_code;
  if (auto const exit_code = gemm::exit_code_without_gpu("demo_reduction")) return *exit_code;
  int sms = 0;
  gemm::check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  std::size_t const n = std::size_t(1) << 26;
  std::vector<float> host(n);
  gemm::Random random(2026);
  double exact = 0.0;
  for (auto& v : host) {
    v = 0.5f * (random.nonzero_uniform() + 1.0f);  // in [0, 1): no cancellation to hide errors
    exact += v;
  }
  float *x = nullptr, *copy = nullptr, *result = nullptr;
  gemm::check_cuda(cudaMalloc(&x, n * sizeof(float)), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&copy, n * sizeof(float)), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&result, sizeof(float)), "cudaMalloc");
  gemm::check_cuda(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "upload");
  gemm::EventTimer timer(nullptr);

  auto measure = [&](auto&& launch) { return gemm::median_time_ms(timer, launch, 3, 21); };
  double const copy_ms = measure([&] {
    gemm::check_cuda(cudaMemcpyAsync(copy, x, n * sizeof(float), cudaMemcpyDeviceToDevice), "copy");
  });
  double const copy_rate = 2.0 * n * sizeof(float) / (copy_ms * 1e-3);
  std::printf("sum of %zu floats (%zu MiB); copy of the same buffer: %.0f GB/s (read + write)\n\n",
              n, n * sizeof(float) >> 20, copy_rate / 1e9);
  std::printf("%-40s %10s %10s %14s %12s\n", "kernel", "time (us)", "GB/s read", "% of copy rate",
              "rel. error");

  auto run = [&](char const* name, auto&& launch) {
    auto once = [&] {
      gemm::check_cuda(cudaMemsetAsync(result, 0, sizeof(float)), "memset");
      launch();
    };
    double const ms = measure(once);
    once();
    float sum = 0.0f;
    gemm::check_cuda(cudaMemcpy(&sum, result, sizeof(float), cudaMemcpyDeviceToHost), "download");
    double const rate = n * sizeof(float) / (ms * 1e-3);
    std::printf("%-40s %10.1f %10.0f %13.1f%% %12.1e\n", name, ms * 1e3, rate / 1e9,
                100.0 * rate / copy_rate, std::fabs(sum - exact) / exact);
  };
  int const grid = sms * (2048 / kBlock);  // one wave of resident blocks
  run("1. shared-memory tree, 1 element/thread", [&] {
    reduce_shared_tree<<<static_cast<unsigned>((n + kBlock - 1) / kBlock), kBlock>>>(x, n, result);
  });
  run("2. warp shuffle, grid-stride", [&] { reduce_shuffle<<<grid, kBlock>>>(x, n, result); });
  run("3. warp shuffle, grid-stride, float4", [&] {
    reduce_shuffle_float4<<<grid, kBlock>>>(reinterpret_cast<float4 const*>(x), n / 4, result);
  });
  cudaFree(x);
  cudaFree(copy);
  cudaFree(result);
  return 0;
}
