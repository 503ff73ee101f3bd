// Demo: what a mistake in a warp-specialized pipeline looks like, and how the debug build turns
// the hang it causes into an error (docs/09_hopper_primer.md, "Debugging a hang").
//
// One block of 384 threads: a producer warpgroup whose thread 0 copies 64 tiles of 4 KB from
// global memory into a ring of 4 shared stages with bulk copies (cp.async.bulk, counted on the
// stage's full mbarrier), and two consumer warpgroups that wait for each full stage, add up its
// floats and hand the stage back on its empty mbarrier, as steps 19-26 do. With --mistake:
//
//   parity   the producer waits on an empty barrier for the phase of the wrong parity
//   bytes    the producer announces 16 bytes more than its copy brings
//   budget   setmaxnreg budgets of 48 (producer) + 2 x 232 (consumers): 65,536 registers, more
//            than the 384 x 168 = 64,512 the block is given at launch
//
// Each mistake hangs the normal build. Built with `meson setup build-debug -Ddebug_hangs=true`,
// every mbarrier wait gives up after a bounded number of tries, prints what it waited for, and
// traps; without that option the demo runs only the correct pipeline and says how to see the rest.
//   build/demo_hang [--mistake parity|bytes|budget]
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "async_copy.cuh"
#include "cuda_check.h"
#include "gpu_info.h"
#include "hang_check.cuh"
#include "mbarrier.cuh"
#include "warp_specialization.cuh"

namespace {

using namespace gemm::hopper;

enum class Mistake { kNone, kParity, kBytes, kBudget };

constexpr int kStages = 4;
constexpr int kTiles = 64;
constexpr int kTileFloats = 1024;  // 4 KB
constexpr int kThreads = 384;      // a producer warpgroup and two consumers
constexpr int kConsumerWarps = 8;

// A bulk copy of `bytes` (a multiple of 16) from global to shared memory, counted on `barrier`.
__device__ __forceinline__ void bulk_copy(std::uint32_t destination, void const* source,
                                          unsigned bytes, std::uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(destination),
      "l"(source), "r"(bytes), "r"(barrier)
      : "memory");
}

template <Mistake kMistake, int kProducerRegisters, int kConsumerRegisters>
__global__ void __launch_bounds__(kThreads, 1)
    pipeline_kernel(float const* __restrict__ source, float* __restrict__ sums) {
  __shared__ alignas(128) float stages[kStages][kTileFloats];
  __shared__ std::uint64_t full[kStages];
  __shared__ std::uint64_t empty[kStages];
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(gemm::shared_address(&full[stage]), 1);
      mbarrier_init(gemm::shared_address(&empty[stage]), kConsumerWarps);
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (threadIdx.x < 128) {
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<kStages> write;
      for (int tile = 0; tile < kTiles; ++tile, write.advance()) {
        // Right: parity phase ^ 1, which returns at once on the first pass around the ring.
        unsigned const parity = kMistake == Mistake::kParity ? write.phase : write.phase ^ 1;
        mbarrier_wait(gemm::shared_address(&empty[write.stage]), parity);
        unsigned const bytes = kTileFloats * 4 + (kMistake == Mistake::kBytes ? 16 : 0);
        std::uint32_t const barrier = gemm::shared_address(&full[write.stage]);
        mbarrier_arrive_expect_bytes(barrier, bytes);
        bulk_copy(gemm::shared_address(stages[write.stage]), source + tile * kTileFloats,
                  kTileFloats * 4, barrier);
      }
    }
    return;
  }
  claim_registers<kConsumerRegisters>();
  int const consumer_thread = threadIdx.x - 128;  // 0 .. 255: 4 floats of each tile
  float sum = 0.0f;
  PipelineState<kStages> read;
  for (int tile = 0; tile < kTiles; ++tile, read.advance()) {
    mbarrier_wait(gemm::shared_address(&full[read.stage]), read.phase);
    for (int i = 0; i < 4; ++i)
      sum += stages[read.stage][consumer_thread * 4 + i];
    __syncwarp();
    if (threadIdx.x % 32 == 0) mbarrier_arrive(gemm::shared_address(&empty[read.stage]));
  }
  sums[consumer_thread] = sum;
}

template <Mistake kMistake, int kProducerRegisters, int kConsumerRegisters>
void run(char const* name) {
  constexpr auto kernel = pipeline_kernel<kMistake, kProducerRegisters, kConsumerRegisters>;
  std::printf("demo_hang: %s, setmaxnreg budgets %d + 2 x %d = %d registers\n", name,
              kProducerRegisters, kConsumerRegisters,
              128 * (kProducerRegisters + 2 * kConsumerRegisters));
  std::printf("  compile-time check against the launch allocation (%d x %d = %d): %s\n", kThreads,
              launch_registers_per_thread(kThreads),
              kThreads * launch_registers_per_thread(kThreads),
              register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, 2)
                  ? "fits"
                  : "does not fit (a static_assert in a step)");
  try {
    check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, 2);
    std::printf("  launch-time check against the compiled kernel: fits\n");
  } catch (std::exception const& refusal) {
    std::printf("  launch-time check against the compiled kernel: %s (a step would stop here)\n",
                refusal.what());
  }
  std::vector<float> host(kTiles * kTileFloats);
  std::iota(host.begin(), host.end(), 0.0f);
  for (float& value : host)
    value = static_cast<float>(static_cast<int>(value) % 7);
  float* source = nullptr;
  float* sums = nullptr;
  gemm::check_cuda(cudaMalloc(&source, host.size() * 4), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&sums, 256 * 4), "cudaMalloc");
  gemm::check_cuda(cudaMemcpy(source, host.data(), host.size() * 4, cudaMemcpyHostToDevice),
                   "cudaMemcpy");
  auto const start = std::chrono::steady_clock::now();
  kernel<<<1, kThreads>>>(source, sums);
  cudaError_t const status = cudaDeviceSynchronize();
  double const seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status != cudaSuccess) {
    std::printf("  the launch failed after %.1f s: %s\n", seconds, cudaGetErrorString(status));
    std::exit(1);
  }
  std::vector<float> result(256);
  gemm::check_cuda(cudaMemcpy(result.data(), sums, 256 * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  double const expected = std::accumulate(host.begin(), host.end(), 0.0);
  double const got = std::accumulate(result.begin(), result.end(), 0.0);
  std::printf("  completed in %.3f s; sum %.0f, expected %.0f: %s\n", seconds, got, expected,
              got == expected ? "right" : "WRONG");
  cudaFree(source);
  cudaFree(sums);
  if (got != expected) std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  char const* usage =
      "usage: demo_hang [--mistake parity|bytes|budget]\n"
      "\n"
      "Runs a small warp-specialized pipeline (one producer warpgroup, two consumers, four\n"
      "stages), correct or with one mistake. A mistake hangs the normal build; a build\n"
      "configured with -Ddebug_hangs=true traps with a message instead.\n"
      "Background: docs/09_hopper_primer.md\n";
  Mistake mistake = Mistake::kNone;
  for (int i = 1; i < argc; ++i) {
    std::string const argument = argv[i];
    if (argument == "-h" || argument == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (argument == "--mistake" && i + 1 < argc) {
      std::string const which = argv[++i];
      if (which == "parity")
        mistake = Mistake::kParity;
      else if (which == "bytes")
        mistake = Mistake::kBytes;
      else if (which == "budget")
        mistake = Mistake::kBudget;
      else {
        std::fprintf(stderr, "demo_hang: unknown mistake '%s'\n%s", which.c_str(), usage);
        return 2;
      }
      continue;
    }
    std::fprintf(stderr, "demo_hang: unknown argument '%s'\n%s", argument.c_str(), usage);
    return 2;
  }
  if (auto const exit_code = gemm::exit_code_without_gpu("demo_hang")) return *exit_code;
  int major = 0;
  gemm::check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
                   "cudaDeviceGetAttribute");
  if (major != 9) {
    std::fprintf(stderr, "demo_hang: needs a Hopper GPU (compute capability 9.0)\n");
    return 77;
  }
  if (mistake != Mistake::kNone && !gemm::kDebugHangs) {
    std::printf(
        "demo_hang: this build would hang on a mistake. To see the debug build report it:\n"
        "  meson setup build-debug -Ddebug_hangs=true && meson compile -C build-debug demo_hang\n"
        "  build-debug/demo_hang --mistake parity\n");
    return 0;
  }
  switch (mistake) {
    case Mistake::kNone:
      run<Mistake::kNone, 40, 232>("the correct pipeline");
      break;
    case Mistake::kParity:
      run<Mistake::kParity, 40, 232>("the wrong parity");
      break;
    case Mistake::kBytes:
      run<Mistake::kBytes, 40, 232>("16 bytes too many announced");
      break;
    case Mistake::kBudget:
      run<Mistake::kBudget, 48, 232>("an over-budget setmaxnreg");
      break;
  }
  return 0;
}
