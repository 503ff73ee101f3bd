// Exercise: step 11, fewer instructions per k tile. Three TODO blocks:
//   1. the copier's source pointers, worked out once before the k loop (with the clamp);
//   2. moving them one k tile down after each copy;
//   3. double-buffered register fragments: load step kk + 1 before the FFMAs of step kk.
// The first two are checked by the GPU suite; the third is correct when single-buffered too,
// so time it: build/exercise_11_fewer_instructions 4096 against build/11_fewer_instructions.
// Build and test: docs/teaching.md ("Exercise mode").

#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 16;     // was 8 in step 10
constexpr int kStages = 4;  // shared buffers: up to 3 tiles in flight
constexpr int kWM = 64;
constexpr int kWN = 32;
constexpr int kWarpsN = kBN / kWN;                    // 4 (and 2 down)
constexpr int kThreads = (kBM / kWM) * kWarpsN * 32;  // 256
constexpr int kLanesM = 8;
constexpr int kLanesN = 32 / kLanesM;        // 4
constexpr int kIterM = kWM / (4 * kLanesM);  // 2
constexpr int kIterN = kWN / (4 * kLanesN);  // 2
constexpr int kTM = 4 * kIterM;              // 8
constexpr int kTN = 4 * kIterN;              // 8
constexpr int kAStride = kBM + 4;            // padded transposed A row: conflict-free copies
constexpr int kStageFloats = kBK * (kAStride + kBN);
constexpr int kSharedBytes = kStages * kStageFloats * static_cast<int>(sizeof(float));  // 65 KB
static_assert(kBK % 8 == 0, "A tiles are copied in groups of 8 k (one 32-byte sector per row)");

// The cp.async copies of one thread, with everything that does not change from one k tile to
// the next worked out once.
//
// A (kBM x kBK per tile) is copied 4 bytes at a time and transposed, as in step 10: a warp
// copies 4 rows x 8 consecutive k, one 32-byte sector per row, and the padding of a_tile's
// rows sends its 32 shared-memory writes to 32 different banks. Each thread copies column
// a_col (0..7) of every group of 8 k, in kAPasses rows kARowsPerPass apart.
//
// B (kBK x kBN per tile) is copied 16 bytes at a time when its rows are 16-byte aligned, else
// 4 bytes at a time. Columns past the right edge of B are zero-filled by the copy (src size
// < 16), since a row of B may end exactly at n.
template <bool kAlignedB>
struct TileCopier {
  static constexpr int kARowsPerPass = kThreads / 8;    // 32
  static constexpr int kAPasses = kBM / kARowsPerPass;  // 4 rows per thread
  static constexpr int kAGroups = kBK / 8;              // 2 groups of 8 k columns
  static constexpr int kBVectorsPerRow = kBN / 4;       // 32
  static constexpr int kBRowsPerPass =                  // 8 (aligned) or 2 (unaligned)
      kAlignedB ? kThreads / kBVectorsPerRow : kThreads / kBN;
  static constexpr int kBPasses = kBK / kBRowsPerPass;  // 2 or 8 copies per thread
  static_assert(kBM % kARowsPerPass == 0 && kBK % kBRowsPerPass == 0, "copy passes");

  float const* a_src[kAPasses];  // row of pass j, at column a_col of the current tile
  float const* b_src;            // first row of this thread's B copies
  float const* a_origin;         // valid addresses for the zero-filling copies of the K tail
  float const* b_origin;         // (the advanced sources may point past the matrix there)
  std::size_t b_pass_step;       // elements between passes: kBRowsPerPass rows of B
  int a_col;                     // k offset of this thread's A copies within a group of 8
  int a_row;                     // tile row of pass 0
  int b_row;                     // tile row of pass 0
  int b_col;                     // tile column of this thread's B copies
  int b_bytes;                   // bytes of the B copy inside B (16, 4, or fewer)

  __device__ TileCopier(float const* A, int lda, float const* B, int ldb, int m, int n,
                        int block_row, int block_col, int tid) {
    a_origin = A;
    b_origin = B;
    a_col = tid % 8;
    a_row = tid / 8;
    // TODO(student): point a_src[j] at column a_col of row block_row + a_row + j * kARowsPerPass
    // of A (a row-major matrix with leading dimension lda). Rows past the bottom of A must not
    // be read: clamp them to row m - 1 instead of checking them in every k tile (they only feed
    // rows of C that are never stored). Use 64-bit arithmetic for the offset.
#pragma unroll
    for (int j = 0; j < kAPasses; ++j) {
      a_src[j] = A;  // placeholder: every pass reads row 0
    }
    // END TODO
    if constexpr (kAlignedB) {
      b_row = tid / kBVectorsPerRow;
      b_col = (tid % kBVectorsPerRow) * 4;
      b_bytes = 4 * max(0, min(4, n - (block_col + b_col)));
    } else {
      b_row = tid / kBN;
      b_col = tid % kBN;
      b_bytes = block_col + b_col < n ? 4 : 0;
    }
    // A zero-byte copy still needs a valid source address: point those at B itself.
    b_src = b_bytes > 0 ? B + static_cast<std::size_t>(b_row) * ldb + block_col + b_col : B;
    b_pass_step = b_bytes > 0 ? static_cast<std::size_t>(kBRowsPerPass) * ldb : 0;
  }

  // Starts the copies of the next k tile into a_tile/b_tile and moves the sources one tile
  // down K. kFullTile: all kBK columns of the tile lie before k (every tile but the last
  // one), so no K check is compiled in; `k_left` is how many do otherwise.
  template <bool kFullTile>
  __device__ __forceinline__ void copy_and_advance(float* a_tile, float* b_tile, int k_left,
                                                   int ldb) {
#pragma unroll
    for (int g = 0; g < kAGroups; ++g) {
      bool const k_ok = kFullTile || g * 8 + a_col < k_left;
#pragma unroll
      for (int j = 0; j < kAPasses; ++j) {
        gemm::cp_async_4(&a_tile[(g * 8 + a_col) * kAStride + a_row + j * kARowsPerPass],
                         k_ok ? a_src[j] + g * 8 : a_origin, k_ok);
      }
    }
#pragma unroll
    for (int p = 0; p < kBPasses; ++p) {
      int const r = b_row + p * kBRowsPerPass;
      bool const k_ok = kFullTile || r < k_left;
      float const* src = b_src + p * b_pass_step;
      float* dst = &b_tile[r * kBN + b_col];
      if constexpr (kAlignedB) {
        gemm::cp_async_16(dst, k_ok ? src : b_origin, k_ok ? b_bytes : 0);
      } else {
        gemm::cp_async_4(dst, k_ok ? src : b_origin, k_ok && b_bytes > 0);
      }
    }
    // TODO(student): move the sources one k tile on: kBK columns along each row of A, kBK rows
    // down B. Leave b_src alone when this thread's copy of B is empty (b_bytes == 0): it points
    // at B itself, a valid address for the zero-filling copy.
    // END TODO
  }
};

// Two blocks per SM (registers capped at 128 per thread), as in steps 09 and 10.
template <bool kAlignedB, bool kAlignedC>
__global__ void __launch_bounds__(kThreads, 2)
    fewer_instructions_sgemm_kernel(int m, int n, int k, float alpha, float const* __restrict__ A,
                                    int lda, float const* __restrict__ B, int ldb, float beta,
                                    float* __restrict__ C, int ldc) {
  extern __shared__ float4 shared_storage[];  // float4: 16-byte alignment for cp.async
  float* const shared = reinterpret_cast<float*>(shared_storage);
  auto a_tile = [&](int stage) { return shared + stage * kStageFloats; };
  auto b_tile = [&](int stage) { return shared + stage * kStageFloats + kBK * kAStride; };

  int const block_row = blockIdx.y * kBM;
  int const block_col = blockIdx.x * kBN;
  int const tid = threadIdx.x;
  int const warp = tid / 32;
  int const lane = tid % 32;
  int const warp_row = (warp / kWarpsN) * kWM;
  int const warp_col = (warp % kWarpsN) * kWN;
  int const lane_row = (lane / kLanesN) * 4;
  int const lane_col = (lane % kLanesN) * 4;
  int const k_tiles = gemm::ceil_div(k, kBK);

  TileCopier<kAlignedB> copier(A, lda, B, ldb, m, n, block_row, block_col, tid);
  int tiles_started = 0;
  int write_stage = 0;
  auto start_next_tile = [&] {
    int const k_left = k - tiles_started * kBK;
    if (k_left >= kBK) {
      copier.template copy_and_advance<true>(a_tile(write_stage), b_tile(write_stage), k_left, ldb);
    } else {
      copier.template copy_and_advance<false>(a_tile(write_stage), b_tile(write_stage), k_left,
                                              ldb);
    }
    ++tiles_started;
    write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
  };

  // Prologue, as in step 10: every iteration commits exactly one group (empty ones past the
  // end), so "wait until kStages - 2 groups are in flight" always means "the oldest tile has
  // landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) start_next_tile();
    gemm::cp_async_commit();
  }

  float acc[kTM][kTN] = {};
  float a_frag[2][kTM];  // [buffer][row]: fragments for two k steps, see load_fragments
  float b_frag[2][kTN];
  auto load_fragments = [&](float const* as, float const* bs, int kk, int buffer) {
#pragma unroll
    for (int im = 0; im < kIterM; ++im) {
      float4 const v = *reinterpret_cast<float4 const*>(
          &as[kk * kAStride + warp_row + im * 4 * kLanesM + lane_row]);
      a_frag[buffer][4 * im + 0] = v.x;
      a_frag[buffer][4 * im + 1] = v.y;
      a_frag[buffer][4 * im + 2] = v.z;
      a_frag[buffer][4 * im + 3] = v.w;
    }
#pragma unroll
    for (int in = 0; in < kIterN; ++in) {
      float4 const v =
          *reinterpret_cast<float4 const*>(&bs[kk * kBN + warp_col + in * 4 * kLanesN + lane_col]);
      b_frag[buffer][4 * in + 0] = v.x;
      b_frag[buffer][4 * in + 1] = v.y;
      b_frag[buffer][4 * in + 2] = v.z;
      b_frag[buffer][4 * in + 3] = v.w;
    }
  };

  int read_stage = 0;
  for (int t = 0; t < k_tiles; ++t) {
    gemm::cp_async_wait<kStages - 2>();  // this thread's copies of tile t are done
    __syncthreads();                     // everyone's are; and everyone finished tile t - 1
    if (tiles_started < k_tiles) start_next_tile();  // refills t - 1's buffer
    gemm::cp_async_commit();

    float const* as = a_tile(read_stage);
    float const* bs = b_tile(read_stage);
    // TODO(student): double-buffer the fragments. Load step 0 into buffer 0 before the loop;
    // in step kk, first start the loads of step kk + 1 into buffer (kk + 1) % 2 (if there is
    // one), then do the FFMAs of step kk from buffer kk % 2. The placeholder is correct but
    // loads and uses the same buffer, so each FFMA waits for its shared loads.
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      load_fragments(as, bs, kk, 0);
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j)
          acc[i][j] = fmaf(a_frag[0][i], b_frag[0][j], acc[i][j]);
      }
    }
    // END TODO
    read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
  }
  gemm::cp_async_wait<0>();  // nothing may still be copying into shared memory at exit

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    int const row = block_row + warp_row + (i / 4) * 4 * kLanesM + lane_row + i % 4;
    if (row >= m) continue;
    float* const c_row = C + static_cast<size_t>(row) * ldc;
#pragma unroll
    for (int in = 0; in < kIterN; ++in) {
      float const* v = &acc[i][4 * in];
      gemm::store_scaled_float4<kAlignedC>(c_row,
                                           block_col + warp_col + in * 4 * kLanesN + lane_col, n,
                                           make_float4(v[0], v[1], v[2], v[3]), alpha, beta);
    }
  }
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 11_fewer_instructions)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  dispatch_bool(rows_are_16_byte_aligned(B, ldb), [&](auto kAlignedB) {
    dispatch_bool(rows_are_16_byte_aligned(C, ldc), [&](auto kAlignedC) {
      auto* const kernel = fewer_instructions_sgemm_kernel<kAlignedB(), kAlignedC()>;
      // Above 48 KB of dynamic shared memory a kernel must opt in, once per kernel.
      static cudaError_t const opt_in =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
      if (opt_in != cudaSuccess) {
        throw std::runtime_error(std::string(routine) + ": cannot reserve " +
                                 std::to_string(kSharedBytes) +
                                 " bytes of shared memory: " + cudaGetErrorString(opt_in));
      }
      kernel<<<grid, kThreads, kSharedBytes, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C,
                                                       ldc);
    });
  });
  check_launch(routine);
}
