// Demo: shared-memory bank conflicts, predicted and measured.
//   build/demo_bank_conflicts
//
// Shared memory has 32 banks of 4-byte words; word w lives in bank w % 32. A warp's load is
// served in as many passes ("wavefronts") as the busiest bank has DIFFERENT words to deliver
// (lanes reading the same word share it: a broadcast). For each access pattern below the
// program computes that number from the 32 addresses, then measures the time per warp-wide
// load with many warps loading in a loop.
//
// A second table does the same for 16-byte loads (LDS.128), where several descriptions of the
// hardware are in circulation: it prints the prediction of each beside the measurement.
//
// To count the wavefronts with the profiler instead (--profile: one launch per pattern, no
// timing; the launches come in the order of the tables):
//   ncu --clock-control none --metrics
//   l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_shared_ld.sum,
//   l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum build/demo_bank_conflicts --profile
#include <cuda_runtime.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "cuda_check.h"
#include "gpu_info.h"
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

// --- 16-byte loads (LDS.128) --------------------------------------------------------------------
// The patterns: which 16-byte chunk (4 consecutive words, chunk c = words 4c .. 4c+3) lane
// `lane` reads in column j. Chunk c covers banks 4 (c % 8) .. 4 (c % 8) + 3.
enum VectorPattern {
  kChunksConsecutive,
  kChunksOne,
  kChunksPairs,
  kChunksQuads,
  kChunksLaneMod8,
  kChunksLaneMod16,
  kChunksHalves,
  kChunksStride2,
  kChunksHalfConflict,
  kChunksLaneMod4,
  kChunksLaneMod2,
  kChunksQuadsAlternate,
  kChunksQuarters,
  kChunksQuartersAlternate,
  kVectorPatternCount
};
char const* const kVectorNames[] = {"32 consecutive chunks (512 B)",
                                    "all lanes read one chunk",
                                    "lane pairs share a chunk (lane / 2)",
                                    "lane quads share a chunk (lane / 4)",
                                    "chunk lane % 8 (each quarter: same 128 B)",
                                    "chunk lane % 16 (each half: same 256 B)",
                                    "one chunk per half warp (lane / 16)",
                                    "every other chunk (2 lane)",
                                    "2 (lane % 16): conflicts inside a half",
                                    "chunk lane % 4",
                                    "chunk lane % 2",
                                    "chunk (lane / 4) % 2",
                                    "one chunk per quarter warp (lane / 8)",
                                    "chunk (lane / 8) % 2"};

__host__ __device__ int chunk_index(int pattern, int lane, int j) {
  switch (pattern) {
    case kChunksConsecutive:
      return lane + 32 * j;
    case kChunksOne:
      return j;
    case kChunksPairs:
      return lane / 2 + 16 * j;
    case kChunksQuads:
      return lane / 4 + 8 * j;
    case kChunksLaneMod8:
      return lane % 8 + 8 * j;
    case kChunksLaneMod16:
      return lane % 16 + 16 * j;
    case kChunksHalves:
      return lane / 16 + 2 * j;
    case kChunksStride2:
      return 2 * lane + 64 * j;
    case kChunksHalfConflict:
      return 2 * (lane % 16) + 32 * j;
    case kChunksLaneMod4:
      return lane % 4 + 4 * j;
    case kChunksLaneMod2:
      return lane % 2 + 2 * j;
    case kChunksQuadsAlternate:
      return (lane / 4) % 2 + 2 * j;
    case kChunksQuarters:
      return lane / 8 + 4 * j;
    case kChunksQuartersAlternate:
      return (lane / 8) % 2 + 2 * j;
  }
  return 0;
}

// Four descriptions of LDS.128, as predictions from the 32 chunk indices. The first three
// are the ones in circulation: the lanes served together need as many wavefronts as the
// busiest bank has distinct words to deliver, and they differ in which lanes are served
// together:
//   kWholeWarp:    all 32 lanes at once (the 4-byte rule, applied to 4 words per lane);
//   kHalfWarps:    lanes 0-15, then lanes 16-31, each half on its own;
//   kQuarterWarps: lanes 0-7, 8-15, 16-23, 24-31, each quarter on its own.
// The fourth is the rule that fits every measurement of this program and of the GEMM steps
// (docs/05_bank_conflicts.md):
//   kQuadsInHalves: each half warp on its own; in it, the lanes of an aligned group of four
//     that read the same chunk make one request, every other (group, chunk) pair another;
//     a wavefront carries 8 requests (128 bytes) and at most one distinct chunk per set of
//     4 banks: max(ceil(requests / 8), most distinct chunks on one set of banks).
enum VectorModel { kWholeWarp, kHalfWarps, kQuarterWarps, kQuadsInHalves };

int predicted_vector_wavefronts(int pattern, int j, VectorModel model) {
  if (model == kQuadsInHalves) {
    int total = 0;
    for (int half = 0; half < 2; ++half) {
      int requests = 0;
      std::vector<std::set<int>> chunks_on_banks(8);  // chunk c uses banks 4 (c % 8) .. + 3
      for (int quad = 4 * half; quad < 4 * half + 4; ++quad) {
        std::set<int> in_quad;
        for (int lane = 4 * quad; lane < 4 * quad + 4; ++lane)
          in_quad.insert(chunk_index(pattern, lane, j));
        requests += static_cast<int>(in_quad.size());
        for (int c : in_quad)
          chunks_on_banks[c % 8].insert(c);
      }
      std::size_t most = 0;
      for (auto const& on_banks : chunks_on_banks)
        most = std::max(most, on_banks.size());
      total += std::max((requests + 7) / 8, static_cast<int>(most));
    }
    return total;
  }
  int const group = model == kWholeWarp ? 32 : model == kHalfWarps ? 16 : 8;
  int total = 0;
  for (int first = 0; first < 32; first += group) {
    std::vector<std::set<int>> words(32);
    for (int lane = first; lane < first + group; ++lane) {
      for (int word = 0; word < 4; ++word) {
        int const w = 4 * chunk_index(pattern, lane, j) + word;
        words[w % 32].insert(w);
      }
    }
    std::size_t most = 0;
    for (auto const& bank : words)
      most = std::max(most, bank.size());
    total += static_cast<int>(most);
  }
  return total;
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

// The same loop with 16-byte loads. Inline PTX pins the instruction (one LDS.128 per lane per
// load); ld.volatile keeps every load inside the loop (ptxas would otherwise load the
// loop-invariant addresses once).
__global__ void shared_vector_load_kernel(int pattern, float* sink) {
  __shared__ float4 chunks[kWords / 4];
  for (int i = threadIdx.x; i < kWords / 4; i += blockDim.x)
    chunks[i] = make_float4(i, i + 1, i + 2, i + 3);
  __syncthreads();
  int const lane = threadIdx.x % 32;
  unsigned address[kLoadsPerIteration];
#pragma unroll
  for (int j = 0; j < kLoadsPerIteration; ++j)
    address[j] =
        static_cast<unsigned>(__cvta_generic_to_shared(&chunks[chunk_index(pattern, lane, j)]));
  float acc = 0.0f;
  for (int it = 0; it < kIterations; ++it) {
#pragma unroll
    for (int j = 0; j < kLoadsPerIteration; ++j) {
      float4 v;
      asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                   : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                   : "r"(address[j]));
      acc += v.x + v.y + v.z + v.w;
    }
  }
  if (acc == -1.0f) *sink = acc;  // never true; keeps the loads
}

}  // namespace

int main(int argc, char** argv) {
  if (auto const exit_code =
          gemm::simple_command_line(argc, argv,
                                    "usage: demo_bank_conflicts [--profile]\n"
                                    "\n"
                                    "Predicts the shared-memory wavefronts of each access pattern "
                                    "from its addresses and measures\n"
                                    "the cycles per load. --profile: one launch per pattern and no "
                                    "timing, for Nsight Compute (the\n"
                                    "command is in docs/05_bank_conflicts.md).\n",
                                    {"--profile"}))
    return *exit_code;
  bool const profile_only = argc > 1 && std::string(argv[1]) == "--profile";
  if (auto const exit_code = gemm::exit_code_without_gpu("demo_bank_conflicts")) return *exit_code;
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

  std::printf("\n%-44s %34s %26s\n", "16-byte loads (LDS.128): chunk read by lane",
              "predicted: warp/half/quarter/rule", "measured cycles per load");
  for (int pattern = 0; pattern < kVectorPatternCount; ++pattern) {
    int predicted[4] = {0, 0, 0, 0};
    for (int j = 0; j < kLoadsPerIteration; ++j) {
      for (int model : {kWholeWarp, kHalfWarps, kQuarterWarps, kQuadsInHalves}) {
        predicted[model] =
            std::max(predicted[model], predicted_vector_wavefronts(pattern, j, VectorModel(model)));
      }
    }
    char predictions[64];
    std::snprintf(predictions, sizeof predictions, "%d / %d / %d / %d", predicted[kWholeWarp],
                  predicted[kHalfWarps], predicted[kQuarterWarps], predicted[kQuadsInHalves]);
    auto launch = [&] { shared_vector_load_kernel<<<grid, kBlock>>>(pattern, sink); };
    if (profile_only) {
      launch();
      gemm::check_cuda(cudaDeviceSynchronize(), "shared_vector_load_kernel");
      std::printf("%-44s %34s\n", kVectorNames[pattern], predictions);
      continue;
    }
    double const cycles = gemm::median_time_ms(timer, launch, 2, 7) * 1e-3 * clock_khz * 1e3;
    std::printf("%-44s %34s %26.2f\n", kVectorNames[pattern], predictions,
                cycles / warp_loads_per_sm);
  }
  cudaFree(sink);
  return 0;
}
