// Demo: what a cluster barrier costs at the start of a kernel, by the ordering it asks for
// (steps/33_relaxed_cluster_sync/README.md).
//
// A grid of 132 blocks of 384 threads in clusters of two, as step 32's kernel launches at small
// shapes. Thread 0 of each block initialises eight mbarriers and fences them
// (fence.mbarrier_init.release.cluster); then every thread passes one of three barriers:
//
//   block     __syncthreads(): the block only, for scale
//   release   barrier.cluster.arrive.release + barrier.cluster.wait.acquire (steps 21-32)
//   relaxed   barrier.cluster.arrive.relaxed + barrier.cluster.wait (step 33)
//
// Thread 0 of each block reads %globaltimer before and after the barrier. For each variant the
// demo launches the kernel 50 times and prints the median, over the launches, of the median and
// the largest time over the blocks, in microseconds. Nsight Compute's gpu__time_duration of the
// same kernels tells the same story from outside.
//   build/demo_cluster_sync_cost
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cluster.cuh"
#include "cuda_check.h"
#include "mbarrier.cuh"

namespace {

using namespace gemm::hopper;

enum class Barrier { kBlock, kRelease, kRelaxed };

constexpr int kBlocks = 132;
constexpr int kThreads = 384;
constexpr int kLaunches = 50;

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t ns = 0;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(ns));
  return ns;
}

template <Barrier kBarrier>
__global__ void __cluster_dims__(2, 1, 1) barrier_kernel(std::uint64_t* nanoseconds) {
  __shared__ alignas(8) std::uint64_t barriers[8];
  std::uint64_t start = 0;
  if (threadIdx.x == 0) {
    for (std::uint64_t& barrier : barriers) {
      mbarrier_init(static_cast<std::uint32_t>(__cvta_generic_to_shared(&barrier)), 1);
    }
    fence_barrier_init();
    start = global_ns();
  }
  if constexpr (kBarrier == Barrier::kBlock) {
    __syncthreads();
  } else if constexpr (kBarrier == Barrier::kRelease) {
    cluster_sync();
  } else {
    cluster_arrive_relaxed();
    cluster_wait();
  }
  if (threadIdx.x == 0) nanoseconds[blockIdx.x] = global_ns() - start;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

template <Barrier kBarrier>
void measure(char const* name, std::uint64_t* device_ns) {
  std::vector<double> medians;
  std::vector<double> maxima;
  std::vector<std::uint64_t> ns(kBlocks);
  for (int launch = 0; launch < kLaunches + 5; ++launch) {
    barrier_kernel<kBarrier><<<kBlocks, kThreads>>>(device_ns);
    gemm::check_cuda(cudaGetLastError(), "launch");
    gemm::check_cuda(
        cudaMemcpy(ns.data(), device_ns, kBlocks * sizeof(std::uint64_t), cudaMemcpyDeviceToHost),
        "download");
    if (launch < 5) continue;  // warm-up
    std::vector<double> us(ns.begin(), ns.end());
    for (double& value : us)
      value /= 1000.0;
    medians.push_back(median(us));
    maxima.push_back(*std::max_element(us.begin(), us.end()));
  }
  std::printf("%-8s  median over blocks %6.3f us   slowest block %6.3f us\n", name, median(medians),
              median(maxima));
}

}  // namespace

int main() {
  std::uint64_t* device_ns = nullptr;
  gemm::check_cuda(cudaMalloc(&device_ns, kBlocks * sizeof(std::uint64_t)), "cudaMalloc");
  std::printf(
      "%d blocks of %d threads, clusters of 2; the barrier after the mbarrier set-up, "
      "median of %d launches:\n",
      kBlocks, kThreads, kLaunches);
  measure<Barrier::kBlock>("block", device_ns);
  measure<Barrier::kRelease>("release", device_ns);
  measure<Barrier::kRelaxed>("relaxed", device_ns);
  cudaFree(device_ns);
  return 0;
}
