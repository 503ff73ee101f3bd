// Step 14: tensor cores through WMMA (BF16 in, FP32 accumulation).
//
// Steps 01-13 multiply with FFMA: one fused multiply-add per thread per instruction, 32 per
// warp. A tensor core multiplies small matrices: one warp-wide instruction takes a 16 x 16
// tile of A, a 16 x 16 tile of B (bf16) and a 16 x 16 FP32 accumulator and adds their product,
// 4,096 multiply-adds (the CUDA API exposes it as nvcuda::wmma; the hardware does it as a few
// HMMA instructions). The operands live in "fragments": registers spread over the 32 lanes of
// the warp in a layout WMMA does not reveal, which is why the data goes through shared memory
// in and out:
//
//   global --cp.async--> shared tiles --wmma.load--> fragments --mma_sync--> accumulators
//   accumulators --store_matrix_sync--> shared scratch --> alpha, beta, bf16 --> C
//
// The block: a 128 x 128 tile of C, 4 warps in 2 x 2, each warp a 64 x 64 warp tile, that is
// 4 x 4 accumulator fragments of 16 x 16 (128 FP32 accumulators per lane). A big warp tile is
// what makes the loads pay: per 16 of k a warp loads 4 fragments of A and 4 of B and does 16
// fragment products with them. The k loop walks K in tiles of 32 through three shared
// buffers (step 10's pipeline): two k tiles are in flight while the tensor cores work on a
// third, and one barrier per k tile both publishes a tile and frees the buffer read last.
// Blocks walk the tiles of C in step 13's grouped order, so that blocks in flight share panels
// of A and B in L2.
//
// The fragment loads name the shared state space. wmma::load_matrix_sync takes a generic
// pointer; for bf16 fragments this compiler does not work out that the pointer is in shared
// memory, and emits four generic 4-byte loads (LD.E) per fragment per lane. The same load
// written in PTX with .shared (load_a_fragment / load_b_fragment below) becomes one ldmatrix
// (LDSM) per fragment. Everything else is WMMA's API.
//
// Rows of the shared tiles are padded by 8 bf16 (16 bytes), as step 07 padded its float tile,
// so that the 8 rows a fragment load reads at once fall into different banks.
//
// Edges: copies past the end of A or B are zero-filled (cp.async with fewer source bytes), so
// partial tiles multiply by zero. A 16-byte copy needs 16-byte-aligned rows (the pointer
// aligned and the leading dimension a multiple of 8 bf16); otherwise the tiles are filled one
// element at a time with ordinary loads (slower, same result). C is written one element at a
// time, only where row < m and col < n, and read only when beta != 0.
#include <cuda_bf16.h>
#include <mma.h>

#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int kBM = 128;    // block tile rows (M)
constexpr int kBN = 128;    // block tile columns (N)
constexpr int kBK = 32;     // k tile depth
constexpr int kStages = 3;  // shared buffers: kStages - 1 k tiles in flight while one is used
constexpr int kGroupM = 8;  // tile rows per group of the block order (step 13)
constexpr int kWarpsM = 2;
constexpr int kWarpsN = 2;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;  // 128
constexpr int kWM = kBM / kWarpsM;                // 64: warp tile rows
constexpr int kWN = kBN / kWarpsN;                // 64: warp tile columns
constexpr int kFrag = 16;                         // WMMA's bf16 shape: 16 x 16 x 16
constexpr int kFragsM = kWM / kFrag;              // 4 accumulator fragments down
constexpr int kFragsN = kWN / kFrag;              // 4 across

// Padded row lengths of the shared tiles, in bf16. WMMA needs a multiple of 8 (16 bytes).
constexpr int kPad = 8;
constexpr int kAStride = kBK + kPad;  // 40 bf16 = 80 bytes
constexpr int kBStride = kBN + kPad;  // 136 bf16 = 272 bytes

constexpr int kChunk = 8;                                         // bf16 per 16-byte copy
constexpr int kAChunksPerThread = kBM * kBK / kChunk / kThreads;  // 4
constexpr int kBChunksPerThread = kBK * kBN / kChunk / kThreads;  // 4
static_assert(kAChunksPerThread * kChunk * kThreads == kBM * kBK, "A copies must divide evenly");
static_assert(kBChunksPerThread * kChunk * kThreads == kBK * kBN, "B copies must divide evenly");

struct SharedTiles {
  bf16 a[kStages][kBM][kAStride];               // 30,720 bytes
  bf16 b[kStages][kBK][kBStride];               // 26,112 bytes
  float scratch[kThreads / 32][kFrag * kFrag];  // one 16 x 16 float tile per warp: 4,096 bytes
};

// Fragment loads from shared memory, as PTX with the state space named: ptxas turns each into
// one ldmatrix. The fragment's 8 bf16 are 4 registers of 2, in the order wmma.load returns them;
// mma_sync then uses the fragment as usual. `row_stride` is the leading dimension in elements.
using AFragment = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, bf16, wmma::row_major>;
using BFragment = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bf16, wmma::row_major>;

__device__ __forceinline__ void load_a_fragment(AFragment& fragment, bf16 const* tile,
                                                unsigned row_stride) {
  auto* r = reinterpret_cast<unsigned*>(fragment.x);
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(gemm::shared_address(tile)), "r"(row_stride));
}

__device__ __forceinline__ void load_b_fragment(BFragment& fragment, bf16 const* tile,
                                                unsigned row_stride) {
  auto* r = reinterpret_cast<unsigned*>(fragment.x);
  asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(gemm::shared_address(tile)), "r"(row_stride));
}

// Copies one k tile of A (kBM x kBK, from column k0) and of B (kBK x kBN, from row k0) into
// the shared buffers of `stage`. Elements outside A or B become zeros.
template <bool kAligned>
__device__ void load_tile(SharedTiles& s, int stage, bf16 const* __restrict__ A, int lda,
                          bf16 const* __restrict__ B, int ldb, int m, int n, int k, int block_row,
                          int block_col, int k0) {
  if constexpr (kAligned) {
    // 16-byte copies: chunk c of the tile is row c / (chunks per row), chunk c % (...).
#pragma unroll
    for (int i = 0; i < kAChunksPerThread; ++i) {
      int const chunk = threadIdx.x + i * kThreads;
      int const row = chunk / (kBK / kChunk);
      int const col = (chunk % (kBK / kChunk)) * kChunk;
      int const global_row = block_row + row;
      int const global_col = k0 + col;
      // Bytes inside A: 0 for rows past m, fewer than 16 for the last chunk of a row.
      int const valid = global_row < m ? max(0, min(kChunk, k - global_col)) : 0;
      bf16 const* src = valid > 0 ? A + static_cast<size_t>(global_row) * lda + global_col : A;
      gemm::cp_async_16(&s.a[stage][row][col], src, 2 * valid);
    }
#pragma unroll
    for (int i = 0; i < kBChunksPerThread; ++i) {
      int const chunk = threadIdx.x + i * kThreads;
      int const row = chunk / (kBN / kChunk);
      int const col = (chunk % (kBN / kChunk)) * kChunk;
      int const global_row = k0 + row;
      int const global_col = block_col + col;
      int const valid = global_row < k ? max(0, min(kChunk, n - global_col)) : 0;
      bf16 const* src = valid > 0 ? B + static_cast<size_t>(global_row) * ldb + global_col : B;
      gemm::cp_async_16(&s.b[stage][row][col], src, 2 * valid);
    }
  } else {
    // One element at a time: any alignment, any leading dimension.
    bf16 const zero = __float2bfloat16(0.0f);
    for (int e = threadIdx.x; e < kBM * kBK; e += kThreads) {
      int const row = e / kBK;
      int const col = e % kBK;
      int const global_row = block_row + row;
      int const global_col = k0 + col;
      s.a[stage][row][col] = global_row < m && global_col < k
                                 ? A[static_cast<size_t>(global_row) * lda + global_col]
                                 : zero;
    }
    for (int e = threadIdx.x; e < kBK * kBN; e += kThreads) {
      int const row = e / kBN;
      int const col = e % kBN;
      int const global_row = k0 + row;
      int const global_col = block_col + col;
      s.b[stage][row][col] = global_row < k && global_col < n
                                 ? B[static_cast<size_t>(global_row) * ldb + global_col]
                                 : zero;
    }
  }
}

// At least two blocks per SM (8 warps): a register cap of 65,536 / (2 x 128) = 256 per thread,
// which the 128 accumulators and the fragments fit under.
template <bool kAligned>
__global__ void __launch_bounds__(kThreads, 2)
    wmma_gemm_kernel(int m, int n, int k, float alpha, bf16 const* __restrict__ A, int lda,
                     bf16 const* __restrict__ B, int ldb, float beta, bf16* __restrict__ C,
                     int ldc) {
  // The tiles live in dynamic shared memory, sized by the launcher: 60,928 bytes, past the
  // 48 KB a block may have without opting in, which the launcher does.
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  SharedTiles& s = *reinterpret_cast<SharedTiles*>(shared_bytes);

  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int const warp_row = (warp / kWarpsN) * kWM;  // within the block tile
  int const warp_col = (warp % kWarpsN) * kWN;
  int tile_m = 0;
  int tile_n = 0;
  gemm::grouped_tile(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, kGroupM, tile_m,
                     tile_n);
  int const block_row = tile_m * kBM;
  int const block_col = tile_n * kBN;

  wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc[kFragsM][kFragsN];
#pragma unroll
  for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragsN; ++j)
      wmma::fill_fragment(acc[i][j], 0.0f);
  }

  int const k_tiles = gemm::ceil_div(k, kBK);
  // Prologue: start the first kStages - 1 tiles. Every stage slot commits a group, empty or
  // not, so that "at most kStages - 2 groups pending" always means "tile t has arrived".
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < k_tiles) {
      load_tile<kAligned>(s, stage, A, lda, B, ldb, m, n, k, block_row, block_col, stage * kBK);
    }
    gemm::cp_async_commit();
  }

  for (int t = 0; t < k_tiles; ++t) {
    gemm::cp_async_wait<kStages - 2>();
    // Tile t is in shared memory for every warp, and every warp has finished tile t - 1,
    // whose buffer the copies below refill.
    __syncthreads();
    int const next = t + kStages - 1;
    if (next < k_tiles) {
      load_tile<kAligned>(s, next % kStages, A, lda, B, ldb, m, n, k, block_row, block_col,
                          next * kBK);
    }
    gemm::cp_async_commit();

    int const stage = t % kStages;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += kFrag) {
      AFragment a_frag[kFragsM];
      BFragment b_frag[kFragsN];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i)
        load_a_fragment(a_frag[i], &s.a[stage][warp_row + i * kFrag][kk], kAStride);
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
        load_b_fragment(b_frag[j], &s.b[stage][kk][warp_col + j * kFrag], kBStride);
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
        for (int j = 0; j < kFragsN; ++j)
          wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
      }
    }
  }
  gemm::cp_async_wait<0>();  // only empty groups can be pending here; none may be at exit

  // Epilogue. The accumulator layout is WMMA's secret, so each fragment goes through a
  // 16 x 16 float scratch tile of the warp's own, where every lane can find its elements:
  // lane l takes row l / 2, columns (l % 2) * 8 .. + 7.
  float* scratch = s.scratch[warp];
  int const r = lane / 2;
  int const c0 = (lane % 2) * 8;
#pragma unroll
  for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragsN; ++j) {
      wmma::store_matrix_sync(scratch, acc[i][j], kFrag, wmma::mem_row_major);
      __syncwarp();
      int const row = block_row + warp_row + i * kFrag + r;
      int const col = block_col + warp_col + j * kFrag + c0;
      if (row < m) {
        bf16* c_row = C + static_cast<size_t>(row) * ldc;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          if (col + c < n) {
            float value = alpha * scratch[r * kFrag + c0 + c];
            if (beta != 0.0f) value += beta * __bfloat162float(c_row[col + c]);
            c_row[col + c] = __float2bfloat16_rn(value);
          }
        }
      }
      __syncwarp();  // the scratch tile is reused by the next fragment
    }
  }
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), "bf16_gemm");
  bool const aligned = rows_are_16_byte_aligned(A, lda) && rows_are_16_byte_aligned(B, ldb);
  dispatch_bool(aligned, [&](auto kAligned) {
    auto const kernel = wmma_gemm_kernel<kAligned()>;
    constexpr int kSharedBytes = sizeof(SharedTiles);
    static cudaError_t const opt_in =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
    if (opt_in != cudaSuccess) {
      throw std::runtime_error("bf16_gemm: this GPU cannot give a block " +
                               std::to_string(kSharedBytes) + " bytes of shared memory (" +
                               cudaGetErrorString(opt_in) + ")");
    }
    kernel<<<grid, kThreads, kSharedBytes, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  });
  check_launch("bf16_gemm");
}
