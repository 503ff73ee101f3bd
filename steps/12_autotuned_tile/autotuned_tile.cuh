// Step 12's kernel as a template over its tile configuration, so that one source gives every
// variant a sweep compares (sweep.cu) and the variant the step uses (autotuned_tile.cu).
//
// The kernel is step 11's: cp.async pipeline, copy addresses worked out once, kBK-deep k
// tiles, double-buffered register fragments. What was a set of constants there is now
// TileConfig: block tile, k depth, warp tile, lane grid, pipeline stages and the number of
// blocks per SM the register budget is cut for. Every derived size is computed from those and
// every precondition they must meet is a static_assert, so an invalid candidate does not
// compile instead of computing garbage.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "device_helpers.cuh"
#include "gemm.h"

namespace autotuned {

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

// Step 11's TileCopier, with the configuration's sizes in place of its constants.
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

template <class Cfg, bool kAlignedB, bool kAlignedC>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSM)
    autotuned_sgemm_kernel(int m, int n, int k, float alpha, float const* __restrict__ A, int lda,
                           float const* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                           int ldc) {
  extern __shared__ float4 shared_storage[];  // float4: 16-byte alignment for cp.async
  float* const shared = reinterpret_cast<float*>(shared_storage);
  auto a_tile = [&](int stage) { return shared + stage * Cfg::kStageFloats; };
  auto b_tile = [&](int stage) {
    return shared + stage * Cfg::kStageFloats + Cfg::kBK * Cfg::kAStride;
  };

  int const block_row = blockIdx.y * Cfg::kBM;
  int const block_col = blockIdx.x * Cfg::kBN;
  int const tid = threadIdx.x;
  int const warp = tid / 32;
  int const lane = tid % 32;
  int const warp_row = (warp / Cfg::kWarpsN) * Cfg::kWM;
  int const warp_col = (warp % Cfg::kWarpsN) * Cfg::kWN;
  int const lane_row = (lane / Cfg::kLanesN) * 4;
  int const lane_col = (lane % Cfg::kLanesN) * 4;
  int const k_tiles = ceil_div(k, Cfg::kBK);

  TileCopier<Cfg, kAlignedB> copier(A, lda, B, ldb, m, n, block_row, block_col, tid);
  int tiles_started = 0;
  int write_stage = 0;
  auto start_next_tile = [&] {
    int const k_left = k - tiles_started * Cfg::kBK;
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
      gemm::store_scaled_float4<kAlignedC>(c_row,
                                           block_col + warp_col + in * 4 * Cfg::kLanesN + lane_col,
                                           n, make_float4(v[0], v[1], v[2], v[3]), alpha, beta);
    }
  }
}

// Launches the kernel of configuration Cfg: the step's entry point and every sweep candidate.
template <class Cfg>
void launch(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
            float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 12_autotuned_tile)";
  gemm::check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = gemm::make_grid(ceil_div(n, Cfg::kBN), ceil_div(m, Cfg::kBM), routine);
  gemm::dispatch_bool(gemm::rows_are_16_byte_aligned(B, ldb), [&](auto kAlignedB) {
    gemm::dispatch_bool(gemm::rows_are_16_byte_aligned(C, ldc), [&](auto kAlignedC) {
      auto* const kernel = autotuned_sgemm_kernel<Cfg, kAlignedB(), kAlignedC()>;
      static cudaError_t const opt_in = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSharedBytes);
      if (opt_in != cudaSuccess) {
        throw std::runtime_error(std::string(routine) + ": cannot reserve " +
                                 std::to_string(Cfg::kSharedBytes) +
                                 " bytes of shared memory: " + cudaGetErrorString(opt_in));
      }
      kernel<<<grid, Cfg::kThreads, Cfg::kSharedBytes, stream>>>(m, n, k, alpha, A, lda, B, ldb,
                                                                 beta, C, ldc);
    });
  });
  gemm::check_launch(routine);
}

}  // namespace autotuned
