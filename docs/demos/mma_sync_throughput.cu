// Demo: the peak rate of the warp-level tensor-core instruction mma.sync.aligned.m16n8k16 on
// this GPU, with nothing in its way: no loads, no address arithmetic, no epilogue.
//   build/demo_mma_sync_throughput
//
// Steps 15-17 feed mma.sync from shared memory, and none of them keeps the tensor pipe busy all the
// time: what would a full pipe give? This program measures that ceiling directly: every
// warp issues mma.sync on fragments it keeps in registers, with ILP independent accumulators,
// and exactly W warps run on every SM. Two things decide the rate:
//  - latency: an mma.sync cannot start before the one before it on the same accumulator has
//    finished, so one accumulator per warp measures the latency, not the throughput;
//  - an SM has 4 warp schedulers, each with its own tensor unit: with fewer than 4 warps per SM
//    some units have nothing to do, whatever the ILP.
// The sweep shows how many warps per scheduler and independent accumulators per warp it takes
// to fill the pipe, for bf16 and f16 inputs with f32 accumulation (what the steps use) and for
// f16 with f16 accumulation.
//
// The percentages are of 989 TFLOP/s, the H100 SXM's dense BF16 (and FP16) tensor-core spec,
// which is quoted for wgmma (steps 18 on); on another GPU they are only a yardstick. The operands
// never change here, so the multipliers switch fewer bits than in a GEMM (less power, perhaps a
// higher clock): the results are an upper bound for mma.sync, not what a GEMM built on it gets.
//
// Each configuration: one untimed launch, then the median of 5 launches timed with CUDA events.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cli.h"
#include "cuda_check.h"
#include "gpu_info.h"
#include "timer.h"

namespace {

enum class Variant { kBf16F32, kF16F32, kF16F16 };

char const* const kVariantNames[] = {"bf16 x bf16 + f32", "f16 x f16 + f32", "f16 x f16 + f16"};

constexpr double kSpecTflops = 989.0;  // H100 SXM, dense BF16 and FP16, tensor cores
constexpr double kFlopsPerMma = 2.0 * 16 * 8 * 16;
constexpr int kIterations = 4096;
// Every iteration issues the same number of mma.sync whatever the ILP (8 / ILP on each
// accumulator), so the loop's own instructions (counter, compare, branch) cost the same share of
// the issue slots in every configuration, and ILP changes only the dependences.
constexpr int kMmaPerIteration = 8;
constexpr int kFragmentWords = 6;  // per lane: A in 4 registers, B in 2

// One accumulator: its registers, the mma.sync that adds A B to them, and the sum of its values.
// asm volatile keeps every mma.sync, in the order written, even though the compiler never sees
// what it computes.
template <Variant V>
struct Accumulator;

template <>
struct Accumulator<Variant::kBf16F32> {
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  __device__ void mma(uint32_t const (&a)[4], uint32_t const (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  __device__ float sum() const { return d[0] + d[1] + d[2] + d[3]; }
};

template <>
struct Accumulator<Variant::kF16F32> {
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  __device__ void mma(uint32_t const (&a)[4], uint32_t const (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  __device__ float sum() const { return d[0] + d[1] + d[2] + d[3]; }
};

// f16 accumulation packs the 4 values of a lane's C tile in 2 registers (2 halves each).
template <>
struct Accumulator<Variant::kF16F16> {
  uint32_t d[2] = {0u, 0u};
  __device__ void mma(uint32_t const (&a)[4], uint32_t const (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, "
        "{%6, %7}, {%0, %1};"
        : "+r"(d[0]), "+r"(d[1])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  __device__ float sum() const {
    float total = 0.0f;
    for (uint32_t word : d) {
      total += __half2float(__ushort_as_half(static_cast<unsigned short>(word & 0xffffu)));
      total += __half2float(__ushort_as_half(static_cast<unsigned short>(word >> 16)));
    }
    return total;
  }
};

template <Variant V, int kChains>
__global__ void mma_loop(uint32_t const* fragments, float* out, int iterations) {
  // The only use of shared memory is the launch's request for most of it: one block per SM.
  extern __shared__ float unused[];
  // Read from memory, the fragments are unknown to the compiler, which therefore cannot fold the
  // products; each lane has its own values, as in a GEMM.
  int const lane = threadIdx.x % 32;
  uint32_t a[4], b[2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    a[i] = fragments[lane * kFragmentWords + i];
#pragma unroll
  for (int i = 0; i < 2; ++i)
    b[i] = fragments[lane * kFragmentWords + 4 + i];

  Accumulator<V> chains[kChains];
  // unroll 1: one copy of the loop body, kMmaPerIteration mma.sync long, so that the count above
  // holds. Inside it, consecutive mma.sync go to different accumulators (when ILP > 1) and the
  // tensor unit can start one before the previous has finished.
#pragma unroll 1
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int j = 0; j < kMmaPerIteration; ++j)
      chains[j % kChains].mma(a, b);
  }

  // Every accumulator reaches memory, so none of the work is dead code.
  float total = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c)
    total += chains[c].sum();
  out[blockIdx.x * blockDim.x + threadIdx.x] = total;
  if (iterations < 0) unused[0] = total;  // never true; keeps the array alive
}

using Kernel = void (*)(uint32_t const*, float*, int);

template <Variant V>
Kernel kernel_for(int chains) {
  switch (chains) {
    case 1:
      return mma_loop<V, 1>;
    case 2:
      return mma_loop<V, 2>;
    case 4:
      return mma_loop<V, 4>;
    default:
      return mma_loop<V, 8>;
  }
}

Kernel kernel_for(Variant variant, int chains) {
  switch (variant) {
    case Variant::kBf16F32:
      return kernel_for<Variant::kBf16F32>(chains);
    case Variant::kF16F32:
      return kernel_for<Variant::kF16F32>(chains);
    default:
      return kernel_for<Variant::kF16F16>(chains);
  }
}

// A lane's fragment registers: values k / 64 with k in -8..8, exact in bf16 and f16. They are
// small because every mma.sync adds the same A B to its accumulator: at most 16 x (1/8)^2 per
// element, times at most 32768 mma.sync on one accumulator, stays below f16's largest value
// (65504).
std::vector<uint32_t> fragment_words(Variant variant) {
  auto bits = [&](float x) -> uint32_t {
    uint16_t b = 0;
    if (variant == Variant::kBf16F32) {
      __nv_bfloat16 const h = __float2bfloat16(x);
      std::memcpy(&b, &h, sizeof b);
    } else {
      __half const h = __float2half(x);
      std::memcpy(&b, &h, sizeof b);
    }
    return b;
  };
  std::vector<uint32_t> words(32 * kFragmentWords);
  for (int lane = 0; lane < 32; ++lane) {
    for (int w = 0; w < kFragmentWords; ++w) {
      int const i = lane * kFragmentWords + w;
      float const low = static_cast<float>((7 * i) % 17 - 8) / 64.0f;
      float const high = static_cast<float>((11 * i + 5) % 17 - 8) / 64.0f;
      words[i] = bits(low) | bits(high) << 16;
    }
  }
  return words;
}

struct Best {
  double tflops = 0.0;
  int warps = 0;
  int chains = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (auto const exit_code = gemm::simple_command_line(
          argc, argv,
          "usage: demo_mma_sync_throughput\n"
          "\n"
          "Measures the rate of mma.sync.aligned.m16n8k16 (bf16 and f16 inputs, f32 and f16\n"
          "accumulation) from registers only, against the warps per SM and the independent\n"
          "accumulators per warp, in TFLOP/s and in % of the H100 SXM's 989 TFLOP/s (dense "
          "BF16).\n"))
    return *exit_code;
  if (auto const exit_code = gemm::exit_code_without_gpu("demo_mma_sync_throughput"))
    return *exit_code;
  cudaDeviceProp prop{};
  gemm::check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int sms = 0, clock_khz = 0, shared_optin = 0;
  gemm::check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  gemm::check_cuda(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "attribute");
  gemm::check_cuda(
      cudaDeviceGetAttribute(&shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
      "attribute");
  // The most shared memory a block may have is more than half of an SM's, so a second block
  // never fits beside the first, and the grid of one block per SM puts exactly W warps on each
  // (checked below with the occupancy calculator).
  int const shared_bytes = shared_optin;

  int const variants[] = {0, 1, 2};
  std::vector<uint32_t> host_fragments;
  for (int v : variants) {
    std::vector<uint32_t> const words = fragment_words(Variant(v));
    host_fragments.insert(host_fragments.end(), words.begin(), words.end());
  }
  uint32_t* fragments = nullptr;
  float* out = nullptr;
  gemm::check_cuda(cudaMalloc(&fragments, host_fragments.size() * sizeof(uint32_t)), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&out, static_cast<size_t>(sms) * 16 * 32 * sizeof(float)),
                   "cudaMalloc");
  gemm::check_cuda(cudaMemcpy(fragments, host_fragments.data(),
                              host_fragments.size() * sizeof(uint32_t), cudaMemcpyHostToDevice),
                   "cudaMemcpy");
  gemm::EventTimer timer(nullptr);

  std::printf("%s: %d SMs, SM clock %d MHz (cudaDevAttrClockRate)\n", prop.name, sms,
              clock_khz / 1000);
  std::printf(
      "one block per SM (%d KB of shared memory), each warp %d mma.sync m16n8k16 from "
      "registers;\n%% of %.0f TFLOP/s, the H100 SXM's dense BF16 tensor-core spec\n",
      shared_bytes / 1024, kIterations * kMmaPerIteration, kSpecTflops);

  int const warp_counts[] = {1, 2, 4, 6, 8, 12, 16};
  int const chain_counts[] = {1, 2, 4, 8};
  Best best[3];
  for (int v : variants) {
    std::printf("\n%-18s %9s %15s %4s %9s %9s %9s\n", "variant", "warps/SM", "warps/scheduler",
                "ILP", "ms", "TFLOP/s", "% of 989");
    uint32_t const* variant_fragments = fragments + v * 32 * kFragmentWords;
    for (int warps : warp_counts) {
      for (int chains : chain_counts) {
        Kernel const kernel = kernel_for(Variant(v), chains);
        gemm::check_cuda(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes),
            "cudaFuncSetAttribute");
        int blocks_per_sm = 0;
        gemm::check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel,
                                                                       32 * warps, shared_bytes),
                         "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
        if (blocks_per_sm != 1) {
          std::fprintf(stderr,
                       "expected exactly 1 block per SM, the occupancy calculator says %d\n",
                       blocks_per_sm);
          return gemm::kExitResources;
        }
        auto launch = [&] {
          kernel<<<sms, 32 * warps, shared_bytes>>>(variant_fragments, out, kIterations);
        };
        double const ms = gemm::median_time_ms(timer, launch, 1, 5);
        double const flops =
            kFlopsPerMma * kMmaPerIteration * double(kIterations) * warps * double(sms);
        double const tflops = flops / (ms * 1e-3) / 1e12;
        std::printf("%-18s %9d %15.2f %4d %9.3f %9.1f %8.1f%%\n", kVariantNames[v], warps,
                    warps / 4.0, chains, ms, tflops, 100.0 * tflops / kSpecTflops);
        if (tflops > best[v].tflops) best[v] = {tflops, warps, chains};
      }
    }
  }
  gemm::check_cuda(cudaDeviceSynchronize(), "the runs");

  std::printf("\nbest configuration of each variant:\n");
  for (int v : variants) {
    std::printf("%-18s %2d warps/SM (%.2f per scheduler), ILP %d: %6.1f TFLOP/s, %5.1f%% of %.0f\n",
                kVariantNames[v], best[v].warps, best[v].warps / 4.0, best[v].chains,
                best[v].tflops, 100.0 * best[v].tflops / kSpecTflops, kSpecTflops);
  }
  cudaFree(fragments);
  cudaFree(out);
  return 0;
}
