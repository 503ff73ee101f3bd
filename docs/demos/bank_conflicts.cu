// Demo: shared-memory bank conflicts, predicted and measured.
//   build/demo_bank_conflicts
//
// Shared memory has 32 banks of 4-byte words; word w lives in bank w % 32. A warp's load is
// served in as many passes ("wavefronts") as the busiest bank has DIFFERENT words to deliver
// (lanes reading the same word share it: a broadcast). For each access pattern below the
// program computes that number from the 32 addresses, then measures the time per warp-wide
// load with many warps loading in a loop.
//
// To count the wavefronts with the profiler instead (--profile: one launch per pattern, no
// timing; the launches come in the order of the table):
//   ncu --clock-control none --metrics
//   l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_shared_ld.sum
//   build/demo_bank_conflicts --profile
#include <cuda_runtime.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "report.h"
#include "timer.h"

namespace {

// The patterns: which word of shared memory lane `lane` reads in column `j` (0..7).
enum Pattern {
  kStride1,
  kStride2,
  kStride4,
  kStride8,
  kStride16,
  kStride32,
  kStride33,
  kBroadcast,
  kTileColumn,
  kTileColumnPadded,
  kTileColumnSwizzled,
  kPatternCount
};
char const* const kNames[] = {"stride 1 (consecutive words)",
                              "stride 2",
                              "stride 4",
                              "stride 8",
                              "stride 16",
                              "stride 32",
                              "stride 33",
                              "all lanes read one word",
                              "column of a 32x32 tile",
                              "column of a 32x33 tile (padded)",
                              "column of a 32x32 tile, XOR swizzle"};

__host__ __device__ int word_index(int pattern, int lane, int j) {
  switch (pattern) {
    case kStride1:
      return lane + 64 * j;
    case kStride2:
      return 2 * lane + 64 * j;
    case kStride4:
      return 4 * lane + 128 * j;
    case kStride8:
      return 8 * lane + 256 * j;
    case kStride16:
      return 16 * lane + j;
    case kStride32:
      return 32 * lane + j;
    case kStride33:
      return 33 * lane + j;
    case kBroadcast:
      return j;
    case kTileColumn:
      return 32 * lane + j;  // tile[lane][j], rows of 32 words
    case kTileColumnPadded:
      return 33 * lane + j;  // tile[lane][j], rows of 33 words
    case kTileColumnSwizzled:
      return 32 * lane + (j ^ lane);  // tile[lane][j ^ lane]
  }
  return 0;
}

// Wavefronts one warp-wide load of column j needs: the most distinct words any bank serves.
int predicted_wavefronts(int pattern, int j) {
  std::vector<std::set<int>> words(32);
  for (int lane = 0; lane < 32; ++lane) {
    int const w = word_index(pattern, lane, j);
    words[w % 32].insert(w);
  }
  std::size_t most = 0;
  for (auto const& bank : words)
    most = std::max(most, bank.size());
  return static_cast<int>(most);
}

constexpr int kWords = 4096;  // 16 KB of shared memory, enough for every pattern
constexpr int kLoadsPerIteration = 8;
constexpr int kIterations = 4096;

__global__ void shared_load_kernel(int pattern, float* sink) {
  __shared__ float words[kWords];
  for (int i = threadIdx.x; i < kWords; i += blockDim.x)
    words[i] = static_cast<float>(i);
  __syncthreads();
  int const lane = threadIdx.x % 32;
  int offset[kLoadsPerIteration];
#pragma unroll
  for (int j = 0; j < kLoadsPerIteration; ++j)
    offset[j] = word_index(pattern, lane, j);
  // volatile: every iteration really loads (the words never change, so the compiler could
  // otherwise load them once).
  float volatile const* shared = words;
  float acc = 0.0f;
  for (int it = 0; it < kIterations; ++it) {
#pragma unroll
    for (int j = 0; j < kLoadsPerIteration; ++j)
      acc += shared[offset[j]];
  }
  if (acc == -1.0f) *sink = acc;  // never true; keeps the loads
}

}  // namespace

int main(int argc, char** argv) {
  bool const profile_only = argc > 1 && std::string(argv[1]) == "--profile";
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "demo_bank_conflicts: no CUDA GPU\n");
    return 3;
  }
  int sms = 0, clock_khz = 0;
  gemm::check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  gemm::check_cuda(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "attribute");
  float* sink = nullptr;
  gemm::check_cuda(cudaMalloc(&sink, sizeof(float)), "cudaMalloc");
  gemm::EventTimer timer(nullptr);

  constexpr int kBlock = 512;  // 16 warps per block
  int const grid = sms * 4;    // 4 blocks = 64 warps per SM: plenty to keep shared memory busy
  double const warp_loads_per_sm =
      double(grid) / sms * (kBlock / 32) * double(kIterations) * kLoadsPerIteration;

  std::printf("%d SMs, %d warps per SM, each warp %d loads; cycles at the %d MHz peak clock\n\n",
              sms, grid / sms * kBlock / 32, kIterations * kLoadsPerIteration, clock_khz / 1000);
  std::printf("%-40s %22s %26s\n", "access pattern (32 lanes, 4-byte words)",
              "predicted wavefronts", "measured cycles per load");
  for (int pattern = 0; pattern < kPatternCount; ++pattern) {
    int predicted = 0;
    for (int j = 0; j < kLoadsPerIteration; ++j)
      predicted = std::max(predicted, predicted_wavefronts(pattern, j));
    auto launch = [&] { shared_load_kernel<<<grid, kBlock>>>(pattern, sink); };
    if (profile_only) {
      launch();
      gemm::check_cuda(cudaDeviceSynchronize(), "shared_load_kernel");
      std::printf("%-40s %22d\n", kNames[pattern], predicted);
      continue;
    }
    double const cycles = gemm::median_time_ms(timer, launch, 2, 7) * 1e-3 * clock_khz * 1e3;
    std::printf("%-40s %22d %26.2f\n", kNames[pattern], predicted, cycles / warp_loads_per_sm);
  }
  cudaFree(sink);
  return 0;
}
