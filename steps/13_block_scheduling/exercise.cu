// Exercise: step 13, block scheduling. Three TODO blocks:
//   1. grouped_tile: the tile a block computes, in groups of group_m tile rows;
//   2. the reduction of the K slices, in a fixed order;
//   3. choose_splits: the number of slices with the smallest estimated time.
// The GPU suite checks the first two (the placeholder of the third cuts K in two slices
// whenever K allows, so the reduction runs; the suite also runs shapes twice and compares the
// bits); the third only changes speed: time build/exercise_13_block_scheduling
// 256x256x65536 1024x1024x16384 against build/13_block_scheduling.
// Build and test: docs/teaching.md ("Exercise mode").

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "block_scheduling.h"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "workspace.h"

namespace scheduling {

using gemm::ceil_div;

// The derived sizes show what they come to for the tile the step uses (64 x 128 x 16, warps
// 32 x 64, lanes 4 x 8, 4 stages, 4 blocks per SM).
template <int kBM_, int kBN_, int kBK_, int kWM_, int kWN_, int kLanesM_, int kStages_,
          int kMinBlocksPerSM_>
struct TileConfig {
  static constexpr int kBM = kBM_;  // block tile rows (M)
  static constexpr int kBN = kBN_;  // block tile columns (N)
  static constexpr int kBK = kBK_;  // depth of one k tile
  static constexpr int kWM = kWM_;  // warp tile rows
  static constexpr int kWN = kWN_;  // warp tile columns
  static constexpr int kStages = kStages_;
  // __launch_bounds__'s second argument: ptxas caps registers at
  // 65,536 / (kThreads * kMinBlocksPerSM), rounded down to a multiple of 8.
  static constexpr int kMinBlocksPerSM = kMinBlocksPerSM_;

  static constexpr int kWarpsM = kBM / kWM;                // 2
  static constexpr int kWarpsN = kBN / kWN;                // 2
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;  // 128
  // Lanes of a warp as a kLanesM x kLanesN grid; each lane owns 4 x 4 sub-tiles spread over
  // the warp tile, so that a warp's 16-byte fragment loads touch contiguous shared memory.
  static constexpr int kLanesM = kLanesM_;            // 4
  static constexpr int kLanesN = 32 / kLanesM;        // 8
  static constexpr int kIterM = kWM / (4 * kLanesM);  // 2 sub-tiles down
  static constexpr int kIterN = kWN / (4 * kLanesN);  // 2 sub-tiles across
  static constexpr int kTM = 4 * kIterM;              // 8 rows of C per thread
  static constexpr int kTN = 4 * kIterN;              // 8 columns of C per thread

  // Shared memory per stage: A transposed with 4 floats of padding per row (conflict-free
  // transposing copies), B as it is in memory.
  static constexpr int kAStride = kBM + 4;
  static constexpr int kStageFloats = kBK * (kAStride + kBN);
  static constexpr int kSharedBytes =  // 50,176 bytes
      kStages * kStageFloats * static_cast<int>(sizeof(float));

  static_assert(kBM % kWM == 0 && kBN % kWN == 0, "warp tiles must cover the block tile");
  static_assert(32 % kLanesM == 0, "lanes must form a grid");
  static_assert(kWM % (4 * kLanesM) == 0 && kWN % (4 * kLanesN) == 0,
                "warp tile must be a whole number of 4 x 4 sub-tiles per lane");
  static_assert(kBK % 8 == 0, "A tiles are copied in groups of 8 k (one 32-byte sector per row)");
  static_assert(kBM % (kThreads / 8) == 0, "A tile copies must divide evenly among threads");
  static_assert(kThreads % (kBN / 4) == 0 && kBK % (kThreads / (kBN / 4)) == 0,
                "16-byte B tile copies must divide evenly among threads");
  static_assert(kThreads % kBN == 0 && kBK % (kThreads / kBN) == 0,
                "4-byte B tile copies (unaligned rows) must cover whole rows of the tile");
  static_assert(kStages >= 2, "a pipeline needs at least two stages");
};

// Step 12's TileCopier (step 11's, with the configuration's sizes in place of its constants).
template <class Cfg, bool kAlignedB>
struct TileCopier {
  static constexpr int kARowsPerPass = Cfg::kThreads / 8;
  static constexpr int kAPasses = Cfg::kBM / kARowsPerPass;
  static constexpr int kAGroups = Cfg::kBK / 8;
  static constexpr int kBVectorsPerRow = Cfg::kBN / 4;
  static constexpr int kBRowsPerPass =
      kAlignedB ? Cfg::kThreads / kBVectorsPerRow : Cfg::kThreads / Cfg::kBN;
  static constexpr int kBPasses = Cfg::kBK / kBRowsPerPass;

  float const* a_src[kAPasses];
  float const* b_src;
  float const* a_origin;
  float const* b_origin;
  std::size_t b_pass_step;
  int a_col;
  int a_row;
  int b_row;
  int b_col;
  int b_bytes;

  __device__ TileCopier(float const* A, int lda, float const* B, int ldb, int m, int n,
                        int block_row, int block_col, int tid) {
    a_origin = A;
    b_origin = B;
    a_col = tid % 8;
    a_row = tid / 8;
#pragma unroll
    for (int j = 0; j < kAPasses; ++j) {
      int const row = min(block_row + a_row + j * kARowsPerPass, m - 1);  // clamped
      a_src[j] = A + static_cast<std::size_t>(row) * lda + a_col;
    }
    if constexpr (kAlignedB) {
      b_row = tid / kBVectorsPerRow;
      b_col = (tid % kBVectorsPerRow) * 4;
      b_bytes = 4 * max(0, min(4, n - (block_col + b_col)));
    } else {
      b_row = tid / Cfg::kBN;
      b_col = tid % Cfg::kBN;
      b_bytes = block_col + b_col < n ? 4 : 0;
    }
    b_src = b_bytes > 0 ? B + static_cast<std::size_t>(b_row) * ldb + block_col + b_col : B;
    b_pass_step = b_bytes > 0 ? static_cast<std::size_t>(kBRowsPerPass) * ldb : 0;
  }

  template <bool kFullTile>
  __device__ __forceinline__ void copy_and_advance(float* a_tile, float* b_tile, int k_left,
                                                   int ldb) {
#pragma unroll
    for (int g = 0; g < kAGroups; ++g) {
      bool const k_ok = kFullTile || g * 8 + a_col < k_left;
#pragma unroll
      for (int j = 0; j < kAPasses; ++j) {
        gemm::cp_async_4(&a_tile[(g * 8 + a_col) * Cfg::kAStride + a_row + j * kARowsPerPass],
                         k_ok ? a_src[j] + g * 8 : a_origin, k_ok);
      }
    }
#pragma unroll
    for (int p = 0; p < kBPasses; ++p) {
      int const r = b_row + p * kBRowsPerPass;
      bool const k_ok = kFullTile || r < k_left;
      float const* src = b_src + p * b_pass_step;
      float* dst = &b_tile[r * Cfg::kBN + b_col];
      if constexpr (kAlignedB) {
        gemm::cp_async_16(dst, k_ok ? src : b_origin, k_ok ? b_bytes : 0);
      } else {
        gemm::cp_async_4(dst, k_ok ? src : b_origin, k_ok && b_bytes > 0);
      }
    }
#pragma unroll
    for (int j = 0; j < kAPasses; ++j)
      a_src[j] += Cfg::kBK;
    if (b_bytes > 0) b_src += static_cast<std::size_t>(Cfg::kBK) * ldb;
  }
};

// Maps a linear tile index to (tile_m, tile_n) in groups of `group_m` tile rows: tile indices
// run down the group_m rows of a group before moving one column right, so the blocks in flight
// together cover a compact patch of C and reuse each other's A and B panels in L2. With
// group_m = 1 the order is plain row-major, as in steps 01-12.
__device__ __forceinline__ void grouped_tile(int tile, int tiles_m, int tiles_n, int group_m,
                                             int& tile_m, int& tile_n) {
  // TODO(student): number the tiles group by group, a group being group_m tile rows (the last
  // group may have fewer), and inside a group column by column: tile indices run down the
  // rows of a group before moving one column right. Every tile must get exactly one index.
  tile_m = 0;  // placeholder: every block computes tile (0, 0)
  tile_n = 0;
  // END TODO
}

template <class Cfg, bool kAlignedB, bool kAlignedOut>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSM)
    scheduled_sgemm_kernel(int m, int n, int k, float alpha, float const* __restrict__ A, int lda,
                           float const* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                           int ldc, int tiles_m, int tiles_n, int group_m, int k_per_split,
                           std::size_t split_stride) {
  extern __shared__ float4 shared_storage[];  // float4: 16-byte alignment for cp.async
  float* const shared = reinterpret_cast<float*>(shared_storage);
  auto a_tile = [&](int stage) { return shared + stage * Cfg::kStageFloats; };
  auto b_tile = [&](int stage) {
    return shared + stage * Cfg::kStageFloats + Cfg::kBK * Cfg::kAStride;
  };

  int tile_m, tile_n;
  grouped_tile(blockIdx.x, tiles_m, tiles_n, group_m, tile_m, tile_n);
  int const block_row = tile_m * Cfg::kBM;
  int const block_col = tile_n * Cfg::kBN;
  // This block's slice of K, and where its result goes: C itself with one slice, else slice
  // blockIdx.y of the workspace (the launcher passes the workspace as C, alpha 1, beta 0).
  int const k_begin = blockIdx.y * k_per_split;
  int const k_end = min(k, k_begin + k_per_split);
  C += blockIdx.y * split_stride;
  A += k_begin;                                  // the slice starts k_begin columns into A
  B += static_cast<std::size_t>(k_begin) * ldb;  // and k_begin rows down B
  int const tid = threadIdx.x;
  int const warp = tid / 32;
  int const lane = tid % 32;
  int const warp_row = (warp / Cfg::kWarpsN) * Cfg::kWM;
  int const warp_col = (warp % Cfg::kWarpsN) * Cfg::kWN;
  int const lane_row = (lane / Cfg::kLanesN) * 4;
  int const lane_col = (lane % Cfg::kLanesN) * 4;
  int const k_slice = k_end - k_begin;
  int const k_tiles = ceil_div(k_slice, Cfg::kBK);

  TileCopier<Cfg, kAlignedB> copier(A, lda, B, ldb, m, n, block_row, block_col, tid);
  int tiles_started = 0;
  int write_stage = 0;
  auto start_next_tile = [&] {
    int const k_left = k_slice - tiles_started * Cfg::kBK;
    if (k_left >= Cfg::kBK) {
      copier.template copy_and_advance<true>(a_tile(write_stage), b_tile(write_stage), k_left, ldb);
    } else {
      copier.template copy_and_advance<false>(a_tile(write_stage), b_tile(write_stage), k_left,
                                              ldb);
    }
    ++tiles_started;
    write_stage = write_stage + 1 == Cfg::kStages ? 0 : write_stage + 1;
  };

#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (s < k_tiles) start_next_tile();
    gemm::cp_async_commit();
  }

  float acc[Cfg::kTM][Cfg::kTN] = {};
  float a_frag[2][Cfg::kTM];
  float b_frag[2][Cfg::kTN];
  auto load_fragments = [&](float const* as, float const* bs, int kk, int buffer) {
#pragma unroll
    for (int im = 0; im < Cfg::kIterM; ++im) {
      float4 const v = *reinterpret_cast<float4 const*>(
          &as[kk * Cfg::kAStride + warp_row + im * 4 * Cfg::kLanesM + lane_row]);
      a_frag[buffer][4 * im + 0] = v.x;
      a_frag[buffer][4 * im + 1] = v.y;
      a_frag[buffer][4 * im + 2] = v.z;
      a_frag[buffer][4 * im + 3] = v.w;
    }
#pragma unroll
    for (int in = 0; in < Cfg::kIterN; ++in) {
      float4 const v = *reinterpret_cast<float4 const*>(
          &bs[kk * Cfg::kBN + warp_col + in * 4 * Cfg::kLanesN + lane_col]);
      b_frag[buffer][4 * in + 0] = v.x;
      b_frag[buffer][4 * in + 1] = v.y;
      b_frag[buffer][4 * in + 2] = v.z;
      b_frag[buffer][4 * in + 3] = v.w;
    }
  };

  int read_stage = 0;
  for (int t = 0; t < k_tiles; ++t) {
    gemm::cp_async_wait<Cfg::kStages - 2>();
    __syncthreads();
    if (tiles_started < k_tiles) start_next_tile();
    gemm::cp_async_commit();

    float const* as = a_tile(read_stage);
    float const* bs = b_tile(read_stage);
    load_fragments(as, bs, 0, 0);
#pragma unroll
    for (int kk = 0; kk < Cfg::kBK; ++kk) {
      if (kk + 1 < Cfg::kBK) load_fragments(as, bs, kk + 1, (kk + 1) % 2);
#pragma unroll
      for (int i = 0; i < Cfg::kTM; ++i) {
#pragma unroll
        for (int j = 0; j < Cfg::kTN; ++j)
          acc[i][j] = fmaf(a_frag[kk % 2][i], b_frag[kk % 2][j], acc[i][j]);
      }
    }
    read_stage = read_stage + 1 == Cfg::kStages ? 0 : read_stage + 1;
  }
  gemm::cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < Cfg::kTM; ++i) {
    int const row = block_row + warp_row + (i / 4) * 4 * Cfg::kLanesM + lane_row + i % 4;
    if (row >= m) continue;
    float* const c_row = C + static_cast<std::size_t>(row) * ldc;
#pragma unroll
    for (int in = 0; in < Cfg::kIterN; ++in) {
      float const* v = &acc[i][4 * in];
      gemm::store_scaled_float4<kAlignedOut>(
          c_row, block_col + warp_col + in * 4 * Cfg::kLanesN + lane_col, n,
          make_float4(v[0], v[1], v[2], v[3]), alpha, beta);
    }
  }
}

// C = alpha * (sum of the `splits` partial products, added in order 0, 1, 2, ...) + beta * C.
// The partials are dense m x n slices, `split_stride` floats apart. One thread per element,
// consecutive threads on consecutive columns: every access is coalesced.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    reduce_splits_kernel(int m, int n, int splits, float const* __restrict__ partials,
                         std::size_t split_stride, float alpha, float beta, float* __restrict__ C,
                         int ldc) {
  int const col = blockIdx.x * kThreads + threadIdx.x;
  if (col >= n) return;
  for (int row = blockIdx.y; row < m; row += gridDim.y) {
    std::size_t const at = static_cast<std::size_t>(row) * n + col;
    // TODO(student): add the `splits` slices, split_stride floats apart, in the order 0, 1,
    // 2, ...: the same order on every run gives the same bits on every run.
    float sum = partials[at];  // placeholder: slice 0 only
    // END TODO
    gemm::store_scaled(C + static_cast<std::size_t>(row) * ldc + col, sum, alpha, beta);
  }
}

// Launches configuration Cfg with `plan`.
template <class Cfg>
void launch(LaunchPlan const& plan, int m, int n, int k, float alpha, float const* A, int lda,
            float const* B, int ldb, float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 13_block_scheduling)";
  gemm::check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  if (plan.splits < 1 || plan.group_m < 1) {
    throw std::invalid_argument(std::string(routine) + ": a plan needs splits, group_m >= 1");
  }
  int const tiles_m = ceil_div(m, Cfg::kBM);
  int const tiles_n = ceil_div(n, Cfg::kBN);
  // Every slice but the last covers a whole number of k tiles; no slice is empty.
  int const k_per_split = ceil_div(ceil_div(k, plan.splits), Cfg::kBK) * Cfg::kBK;
  int const splits = ceil_div(k, k_per_split);
  std::size_t const split_stride = static_cast<std::size_t>(m) * n;
  if (static_cast<long long>(tiles_m) * tiles_n > 0x7fffffff || splits > 65535) {
    throw std::invalid_argument(std::string(routine) + ": the problem needs too many blocks");
  }
  dim3 const grid(tiles_m * tiles_n, splits);

  auto run = [&](float* out, int ld_out, float alpha_out, float beta_out, bool aligned_out) {
    gemm::dispatch_bool(gemm::rows_are_16_byte_aligned(B, ldb), [&](auto kAlignedB) {
      gemm::dispatch_bool(aligned_out, [&](auto kAlignedOut) {
        auto* const kernel = scheduled_sgemm_kernel<Cfg, kAlignedB(), kAlignedOut()>;
        static cudaError_t const opt_in = cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSharedBytes);
        if (opt_in != cudaSuccess) {
          throw std::runtime_error(std::string(routine) + ": cannot reserve " +
                                   std::to_string(Cfg::kSharedBytes) +
                                   " bytes of shared memory: " + cudaGetErrorString(opt_in));
        }
        kernel<<<grid, Cfg::kThreads, Cfg::kSharedBytes, stream>>>(
            m, n, k, alpha_out, A, lda, B, ldb, beta_out, out, ld_out, tiles_m, tiles_n,
            plan.group_m, k_per_split, split_stride);
      });
    });
  };

  if (splits == 1) {
    run(C, ldc, alpha, beta, gemm::rows_are_16_byte_aligned(C, ldc));
  } else {
    // The partial sums: `splits` dense m x n slices, taken from a stream-ordered pool (no
    // device-wide synchronization) and given back when this scope ends, after the reduction
    // has been enqueued. Slices are 16-byte aligned rows when n is a multiple of 4.
    gemm::StreamWorkspace partials(sizeof(float) * split_stride * splits, stream);
    run(partials.get<float>(), n, 1.0f, 0.0f, n % 4 == 0);
    gemm::check_launch(routine);
    constexpr int kReduceThreads = 256;
    dim3 const reduce_grid(ceil_div(n, kReduceThreads), std::min(m, 1024));
    reduce_splits_kernel<kReduceThreads><<<reduce_grid, kReduceThreads, 0, stream>>>(
        m, n, splits, partials.get<float>(), split_stride, alpha, beta, C, ldc);
  }
  gemm::check_launch(routine);
}

// --- the plan: how many K slices ------------------------------------------------------------

// Step 12's tile: 64 x 128 x 16, 4 warps of 32 x 64, 4 stages, four blocks per SM.
//                                    kBM  kBN kBK kWM kWN lanesM stages blocks/SM
using Tile = TileConfig<64, 128, 16, 32, 64, 4, 4, 4>;

// A last, partial wave that leaves q < kMinBlocksPerSM blocks on an SM does not finish in
// q / kMinBlocksPerSM of a full wave's time: with fewer warps to switch between, each block
// runs faster than when it shares the SM, but not proportionally. Modeled as
// (q + 1) / (kMinBlocksPerSM + 1) of a full wave: one lone block per SM takes 0.4 of a wave
// instead of 0.25. README.md compares the model's picks with the measured plans.
double partial_wave(long long blocks_per_sm) {
  return static_cast<double>(blocks_per_sm + 1) / (Tile::kMinBlocksPerSM + 1);
}

// FLOPs the GPU can do in the time it moves one byte to or from device memory: the FP32 FMA
// peak over the measured copy bandwidth, 15.8 on an H200 and 22.4 on an H100 SXM
// (build/demo_device_query; docs/results/). It converts the bytes of the partial sums into
// arithmetic time. 16 or 22 make the same choices on the sizes of the progression table but
// one: 4097^3 takes 3 slices with 16 and 1 with 22, and there the measured plans are within
// 1% of each other (docs/results/sweep_13_h100_2026-11-22.txt).
constexpr double kMachineBalance = 16.0;

// Estimated time of a launch with `splits` K slices, in units of "one full wave of blocks,
// each over all of K":
//   - the blocks: tiles x splits of them, in waves of (SMs x blocks per SM), each wave
//     1 / splits as long as a full-K one; a last, partial wave as partial_wave says;
//   - the partial sums (splits > 1): each slice writes m x n floats and the reduction reads
//     them all and writes C, 4 (2 splits + 1) m n bytes. At the machine balance they cost
//     as long as kMachineBalance times as many FLOPs, out of the problem's 2 m n k.
double estimated_time(int m, int n, int k, int splits, int sms) {
  long long const tiles =
      static_cast<long long>(gemm::ceil_div(m, Tile::kBM)) * gemm::ceil_div(n, Tile::kBN);
  long long const slots = static_cast<long long>(sms) * Tile::kMinBlocksPerSM;
  long long const blocks = tiles * splits;
  long long const full_waves = blocks / slots;
  long long const rest = blocks % slots;
  double waves = static_cast<double>(full_waves);
  if (rest > 0) {
    long long const blocks_per_sm = (rest + sms - 1) / sms;  // on the busiest SM
    waves += partial_wave(blocks_per_sm);
  }
  double time = waves / splits;
  if (splits > 1) {
    double const mn = static_cast<double>(m) * n;
    double const partial_bytes = 4.0 * mn * (2.0 * splits + 1.0);
    double const flops = 2.0 * mn * k;
    double const ideal_waves = static_cast<double>(tiles) / slots;  // the GEMM at full speed
    time += ideal_waves * kMachineBalance * partial_bytes / flops;
  }
  return time;
}

// The number of K slices with the smallest estimate, each slice at least kMinSliceDepth deep
// (16 k tiles: below that, the pipeline's prologue and the epilogue dominate a block).
// On 132 SMs: 4096^3, 8192^3 and 1000x3000x2000 keep 1; 4097^3 takes 3; 256x256x65536, with
// 8 tiles for 528 block slots, takes 66.
constexpr int kMinSliceDepth = 256;
constexpr int kMaxSplits = 256;
int choose_splits(int m, int n, int k, int sms) {
  // TODO(student): of 1 to kMaxSplits slices, each at least kMinSliceDepth deep, return the
  // number with the smallest estimated_time (ties: the fewer slices).
  (void)m, (void)n, (void)sms, (void)kMaxSplits;
  return k >= 2 * kMinSliceDepth ? 2 : 1;  // placeholder: two slices whenever K allows
  // END TODO
}

int sm_count() {
  int device = 0;
  int count = 0;
  gemm::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  gemm::check_cuda(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
                   "cudaDeviceGetAttribute");
  return count;
}

void launch_with_plan(LaunchPlan const& plan, int m, int n, int k, float alpha, float const* A,
                      int lda, float const* B, int ldb, float beta, float* C, int ldc,
                      cudaStream_t stream) {
  launch<Tile>(plan, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}

}  // namespace scheduling

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("sgemm (step 13_block_scheduling)", m, n, k, A, lda, B, ldb, C, ldc);
  scheduling::LaunchPlan plan;
  plan.splits = scheduling::choose_splits(m, n, k, scheduling::sm_count());
  plan.group_m = 8;
  scheduling::launch_with_plan(plan, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}
