// Demo: occupancy and the tail effect.
//   build/demo_occupancy_tail
//
// 1. Occupancy. A copy that moves one float per thread per iteration has little independent
//    work per warp: the SM hides the memory latency only by switching between many warps. We
//    limit the resident blocks per SM by asking for shared memory we do not use, and watch
//    the bandwidth follow the number of resident warps.
// 2. The tail effect. Blocks that each fill a whole SM run in waves of (number of SMs)
//    blocks. One block more than a full wave costs a whole extra wave: time is a staircase in
//    the number of blocks, and the last, partial wave leaves SMs idle.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "cli.h"
#include "cuda_check.h"
#include "gpu_info.h"
#include "timer.h"

namespace {

__global__ void copy_one_float_per_thread(float const* __restrict__ src, float* __restrict__ dst,
                                          std::size_t n) {
  extern __shared__ float unused[];  // only here to limit the blocks per SM
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
  if (n == 0) unused[threadIdx.x] = 0.0f;  // never true; keeps the array alive
}

// A fixed amount of arithmetic per block: 1024 threads x kIterations x 4 dependent-chain FMAs.
constexpr int kIterations = 20000;
__global__ void fixed_work_block(float* out, float seed) {
  float a = seed + threadIdx.x, b = a + 1.0f, c = a + 2.0f, d = a + 3.0f;
  for (int i = 0; i < kIterations; ++i) {
    a = fmaf(a, 0.9999f, 0.5f);
    b = fmaf(b, 0.9999f, 0.5f);
    c = fmaf(c, 0.9999f, 0.5f);
    d = fmaf(d, 0.9999f, 0.5f);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

}  // namespace

int main(int argc, char** argv) {
  if (auto const exit_code = gemm::simple_command_line(
          argc, argv,
          "usage: demo_occupancy_tail\n"
          "\n"
          "Measures a copy's bandwidth against the resident warps per SM, and a kernel's time "
          "against\n"
          "its number of blocks (waves and the tail). Background: docs/03_occupancy_and_tail.md\n"))
    return *exit_code;
  if (auto const exit_code = gemm::exit_code_without_gpu("demo_occupancy_tail")) return *exit_code;
  int sms = 0, smem_per_sm = 0, reserved = 0, max_threads = 0;
  gemm::check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  gemm::check_cuda(
      cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0),
      "attribute");
  gemm::check_cuda(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, 0),
                   "attribute");
  gemm::check_cuda(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, 0),
                   "attribute");
  gemm::EventTimer timer(nullptr);

  // --- 1. occupancy -------------------------------------------------------------------------
  std::size_t const n = (std::size_t(1) << 30) / sizeof(float);  // 1 GiB per buffer
  float *src = nullptr, *dst = nullptr;
  gemm::check_cuda(cudaMalloc(&src, n * sizeof(float)), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&dst, n * sizeof(float)), "cudaMalloc");
  gemm::check_cuda(cudaMemset(src, 0, n * sizeof(float)), "cudaMemset");
  gemm::check_cuda(
      cudaFuncSetAttribute(copy_one_float_per_thread, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           smem_per_sm - reserved),
      "cudaFuncSetAttribute");
  constexpr int kBlock = 256;
  std::printf("1. occupancy: float copy, 1 GiB, %d threads per block, one wave of blocks\n",
              kBlock);
  std::printf("   %-28s %-13s %-18s %s\n", "shared memory per block", "blocks per SM",
              "warps per SM (occ.)", "bandwidth");
  for (int target : {1, 2, 3, 4, 6, 8}) {
    // Ask for just enough shared memory that only `target` blocks fit on an SM.
    int const smem = target == 8 ? 0 : smem_per_sm / target - reserved - 1024;
    int blocks_per_sm = 0;
    gemm::check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                         &blocks_per_sm, copy_one_float_per_thread, kBlock, smem),
                     "occupancy");
    int const grid = blocks_per_sm * sms;
    double const ms = gemm::median_time_ms(
        timer, [&] { copy_one_float_per_thread<<<grid, kBlock, smem>>>(src, dst, n); }, 2, 11);
    int const warps = blocks_per_sm * kBlock / 32;
    std::printf("   %8d bytes               %-13d %3d (%5.1f%%)        %6.0f GB/s\n", smem,
                blocks_per_sm, warps, 100.0 * warps * 32 / max_threads,
                2.0 * n * sizeof(float) / (ms * 1e-3) / 1e9);
  }
  cudaFree(src);
  cudaFree(dst);

  // --- 2. tail effect -----------------------------------------------------------------------
  // 1024 threads per block: at most 2 blocks per SM by threads; asking for more than half the
  // SM's shared memory makes it exactly 1, so a wave is `sms` blocks.
  int const big_smem = smem_per_sm / 2 + 1024;
  gemm::check_cuda(
      cudaFuncSetAttribute(fixed_work_block, cudaFuncAttributeMaxDynamicSharedMemorySize, big_smem),
      "cudaFuncSetAttribute");
  int per_sm = 0;
  gemm::check_cuda(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fixed_work_block, 1024, big_smem),
      "occupancy");
  std::printf(
      "\n2. tail effect: blocks of 1024 threads with identical work, %d block(s) per SM, %d SMs\n",
      per_sm, sms);
  std::printf("   %-8s %-7s %-10s %-22s %s\n", "blocks", "waves", "time (ms)",
              "time / one-wave time", "SM slots used");
  float* out = nullptr;
  int const max_blocks = 4 * sms * per_sm + 1;
  gemm::check_cuda(cudaMalloc(&out, std::size_t(max_blocks) * 1024 * sizeof(float)), "cudaMalloc");
  int const slots = sms * per_sm;
  double one_wave = 0.0;
  for (int blocks : {slots / 4, slots / 2, slots, slots + 1, slots + slots / 4, 2 * slots,
                     2 * slots + 1, 3 * slots, 3 * slots + slots / 10, 4 * slots}) {
    double const ms = gemm::median_time_ms(
        timer, [&] { fixed_work_block<<<blocks, 1024, big_smem>>>(out, 1.0f); }, 2, 5);
    if (blocks == slots) one_wave = ms;
    int const waves = (blocks + slots - 1) / slots;
    std::printf("   %-8d %-7.2f %-10.3f %-22s %5.1f%%\n", blocks, double(blocks) / slots, ms,
                one_wave > 0 ? (std::to_string(ms / one_wave).substr(0, 4) + "x").c_str() : "",
                100.0 * blocks / (double(waves) * slots));
  }
  cudaFree(out);
  return 0;
}
