// Exercise for step 10: asynchronous copies and a kStages-deep pipeline. Read the header of
// async_copy.cu (the solution, beside this file) and common/async_copy.cuh first: how
// cp.async groups are committed and waited for is the whole exercise.
//
// start_copy(tile) (in the kernel) issues the cp.async copies of one k tile into shared stage
// tile % kStages; it neither commits nor waits. Fill in the two TODO(student) blocks, then
// build and check your kernel:
//   meson setup build -Dexercises=true   (or: meson configure build -Dexercises=true)
//   meson test -C build exercise_10_async_copy --print-errorlogs   the shared GPU suite
//   build/exercise_10_async_copy 4096                                time it against cuBLAS
// The suite fails until both blocks are right. The solution is async_copy.cu, beside this
// file.

#include "device_helpers.cuh"
#include "gemm.h"

namespace {

// --- cp.async, as PTX (later steps include these from common/async_copy.cuh) --------------------
//
// A cp.async is issued like a load, but its data goes straight into shared memory without passing
// through registers, and the issuing thread does not wait for it. Copies are grouped:
// commit_group closes the group of copies issued since the last commit, and wait_group<N> blocks
// until at most N of this thread's groups are still in flight; a __syncthreads() after the wait
// makes every thread's copies visible to the whole block. A source size below the copy size
// zero-fills the rest of the destination (0 copies nothing and writes zeros), which pads edge
// tiles without a branch; the source address must still be valid and aligned.

// The address of a shared-memory pointer in the shared state space, as PTX wants it.
__device__ __forceinline__ unsigned shared_address(void const* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// 4 bytes, through L1 (.ca: the only caching mode allowed below 16 bytes).
__device__ __forceinline__ void cp_async_4(float* dst, float const* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 4 : 0));
}

// 16 bytes, bypassing L1 (.cg: the data is used once, from shared memory); dst and src 16-byte
// aligned; `src_bytes` of them copied, the rest zero-filled.
__device__ __forceinline__ void cp_async_16(float* dst, float const* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int kGroupsStillInFlight>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kGroupsStillInFlight));
}

// --- the kernel ---------------------------------------------------------------------------------

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;
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
constexpr int kSharedBytes = kStages * kStageFloats * static_cast<int>(sizeof(float));  // 33 KB
static_assert(kBM * kBK % kThreads == 0 && kBK * kBN / 4 == kThreads, "copy pattern");

// Starts the copies of one k tile (A transposed into a_tile, B into b_tile).
template <bool kAlignedB>
__device__ __forceinline__ void start_tile_copy(float* a_tile, float* b_tile, float const* A,
                                                int lda, float const* B, int ldb, int m, int n,
                                                int k, int block_row, int block_col, int k0,
                                                int tid) {
  // A: a warp copies 4 rows x 8 consecutive k (one 32-byte sector per row); the padded stride
  // sends the 32 writes to 32 different banks.
#pragma unroll
  for (int i = 0; i < kBM * kBK / kThreads; ++i) {
    int const idx = tid + i * kThreads;
    int const r = idx / kBK;
    int const c = idx % kBK;
    int const row = block_row + r;
    int const col = k0 + c;
    bool const valid = row < m && col < k;
    cp_async_4(&a_tile[c * kAStride + r], valid ? A + static_cast<size_t>(row) * lda + col : A,
               valid);
  }
  if constexpr (kAlignedB) {
    int const r = tid / (kBN / 4);
    int const c = (tid % (kBN / 4)) * 4;
    int const row = k0 + r;
    int const col = block_col + c;
    int const bytes = row < k ? 4 * max(0, min(4, n - col)) : 0;  // partial vector at the edge
    cp_async_16(&b_tile[r * kBN + c], bytes > 0 ? B + static_cast<size_t>(row) * ldb + col : B,
                bytes);
  } else {
#pragma unroll
    for (int i = 0; i < kBK * kBN / kThreads; ++i) {
      int const idx = tid + i * kThreads;
      int const r = idx / kBN;
      int const c = idx % kBN;
      int const row = k0 + r;
      int const col = block_col + c;
      bool const valid = row < k && col < n;
      cp_async_4(&b_tile[r * kBN + c], valid ? B + static_cast<size_t>(row) * ldb + col : B, valid);
    }
  }
}

// Two blocks per SM (registers capped at 128 per thread), as in step 09.
template <bool kAlignedB, bool kAlignedC>
__global__ void __launch_bounds__(kThreads, 2)
    async_copy_sgemm_kernel(int m, int n, int k, float alpha, float const* __restrict__ A, int lda,
                            float const* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                            int ldc) {
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

  auto start_copy = [&](int tile) {
    int const stage = tile % kStages;
    start_tile_copy<kAlignedB>(a_tile(stage), b_tile(stage), A, lda, B, ldb, m, n, k, block_row,
                               block_col, tile * kBK, tid);
  };

  // TODO(student): the prologue. Start the first kStages - 1 k tiles (start_copy) and close
  // the copies of each tile into a group of its own (cp_async_commit()), so that up to
  // kStages - 1 tiles are in flight when the loop begins. Pitfall: K may hold fewer tiles than
  // that (k_tiles in all). Never start a tile that does not exist, but commit a group for it
  // anyway, an empty one: the wait in the loop counts GROUPS, so its count only means "tile t
  // has landed" if every tile, real or not, accounts for exactly one group.
  (void)start_copy;
  // END TODO

  float acc[kTM][kTN] = {};
  float a_reg[kTM];
  float b_reg[kTN];
  for (int t = 0; t < k_tiles; ++t) {
    // TODO(student): one step of the pipeline, before tile t is computed from stage t % kStages.
    //  1. Wait for tile t, and only for it: cp_async_wait<N>() returns once at most N
    //     groups of THIS thread are still in flight. Which N leaves the tiles after t in
    //     flight? (N must be a compile-time constant; waiting for 0 is correct but serializes.)
    //  2. Then a barrier: the wait covers only this thread's own copies, and tile t was copied
    //     by the whole block. The same barrier also tells you every warp is done with tile t - 1.
    //  3. Then keep the pipeline full: start the tile kStages - 1 ahead of t, if it exists, and
    //     commit one group (empty or not, as in the prologue).
    // Pitfall: that new tile lands in the stage tile t - 1 was computed from, so it must not be
    // started before the barrier, or slow warps read a stage that is being overwritten.
    cp_async_wait<0>();
    __syncthreads();
    // END TODO

    float const* as = a_tile(t % kStages);
    float const* bs = b_tile(t % kStages);
#pragma unroll
    for (int p = 0; p < kBK; ++p) {
#pragma unroll
      for (int im = 0; im < kIterM; ++im) {
        float4 const v = *reinterpret_cast<float4 const*>(
            &as[p * kAStride + warp_row + im * 4 * kLanesM + lane_row]);
        a_reg[4 * im + 0] = v.x, a_reg[4 * im + 1] = v.y;
        a_reg[4 * im + 2] = v.z, a_reg[4 * im + 3] = v.w;
      }
#pragma unroll
      for (int in = 0; in < kIterN; ++in) {
        float4 const v =
            *reinterpret_cast<float4 const*>(&bs[p * kBN + warp_col + in * 4 * kLanesN + lane_col]);
        b_reg[4 * in + 0] = v.x, b_reg[4 * in + 1] = v.y;
        b_reg[4 * in + 2] = v.z, b_reg[4 * in + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j)
          acc[i][j] = fmaf(a_reg[i], b_reg[j], acc[i][j]);
      }
    }
  }
  cp_async_wait<0>();  // nothing may still be copying into shared memory at exit

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
  char const* const routine = "sgemm (step 10_async_copy)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  // Two independent choices, B's copies and C's stores, each a template argument: the
  // generic lambdas of dispatch_bool instantiate the four kernels.
  static_assert(kSharedBytes <= 48 * 1024, "no opt-in needed below 48 KB");
  dispatch_bool(rows_are_16_byte_aligned(B, ldb), [&](auto kAlignedB) {
    dispatch_bool(rows_are_16_byte_aligned(C, ldc), [&](auto kAlignedC) {
      async_copy_sgemm_kernel<kAlignedB(), kAlignedC()>
          <<<grid, kThreads, kSharedBytes, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    });
  });
  check_launch(routine);
}
