// Step 24: the epilogue as TMA stores. In step 23 the consumers write C with ordinary stores
// while the tensor cores wait, and when K is short (8192x8192x1024: 16 k tiles per tile) that
// wait is a large part of each tile. Here each consumer stages its 64 x 64 pieces of C in shared
// memory, swizzled as TMA expects, and hands them to TMA stores, which run on while the next
// tile's wgmma start. Two staging buffers per consumer: it fills one while TMA still reads the
// other, and bulk groups say when a buffer may be rewritten.
//
// The TMA-store wrappers and the epilogue (store_tile) are written out below; later steps include
// them from common/tma_store.cuh. Everything else is step 23's, and the kernel now reads as the
// phases it runs: produce (the producer's TMA loads) and consume_k_range (a tile's wgmma), the
// loops of steps 19-21 as functions (common/pipeline_phases.cuh), then store_tile.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "aligned_operand.cuh"
#include "cluster.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "launch.h"
#include "mbarrier.cuh"
#include "pipeline_phases.cuh"
#include "tensor_map.h"
#include "warp_specialization.cuh"
#include "wgmma.cuh"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

// --- TMA stores ---------------------------------------------------------------------------------

// Copies the box at shared address `source` to coordinates (inner, outer) of `map`, clipping what
// lies outside the matrix. The copy runs on after the call returns: bulk_commit_group closes the
// copies issued so far into a group, bulk_wait_group_read<N> waits until at most N groups still
// *read* shared memory (their source may then be rewritten), and bulk_wait_group<N> until their
// writes to global memory are done.
__device__ __forceinline__ void tma_store_2d(CUtensorMap const* map, std::uint32_t source,
                                             int inner, int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
          reinterpret_cast<std::uint64_t>(map)),
      "r"(inner), "r"(outer), "r"(source)
      : "memory");
}
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
template <int kPending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Shared memory written by ordinary stores that the copy engine reads next must be made visible
// to it, the "async proxy", first: every writing thread fences, then the threads synchronize,
// then one thread issues the copy.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A barrier among `threads` threads (a multiple of 32) of the block, numbered `id` (1-15; 0 is
// __syncthreads'): lets one warpgroup synchronize without stopping the others.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// --- the tile -----------------------------------------------------------------------------------

constexpr int kBM = 128;
constexpr int kBK = 64;
constexpr int kConsumers = 2;
constexpr int kClusterSize = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 4;
constexpr int kBoxN = 64;  // B boxes, and the pieces of C the epilogue stores: 64 columns wide
constexpr int kWgmmaK = 16;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kMaxSharedBytes = 227 * 1024;            // the most a block may opt in to on sm_90
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;  // 8 KB

static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
              "the register budgets must fit what the block is given at launch");

// How C is written. kTmaStore needs C to be a legal TMA operand (16-byte-aligned rows); the
// others are step 23's direct stores, in pairs when C's rows are 4-byte aligned.
enum class Epilogue { kTmaStore, kPairStores, kSingleStores };

// Everything that follows from the tile width kBN: step 23's stages, plus the staging buffers of
// C: two 64 x 64 pieces (8 KB each) per consumer, and as many stages as fit beside them.
template <int kBN>
struct Tile {
  static constexpr int kBoxes = kBN / kBoxN;
  struct Stage {
    alignas(1024) bf16 a[kBM * kBK];
    alignas(1024) bf16 b[kBK * kBN];
  };
  static constexpr int kStagingBytes = kConsumers * 2 * 64 * 64 * 2;
  static constexpr int kStages =
      std::min<int>(6, (kMaxSharedBytes - 2048 - kStagingBytes) / static_cast<int>(sizeof(Stage)));
  struct SharedStorage {
    Stage stages[kStages];
    alignas(1024) bf16 staging[kConsumers][2][64 * 64];
    std::uint64_t full[kStages];
    std::uint64_t empty[kStages];
  };
  static constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();
  static_assert(kBN % kBoxN == 0 && kBN >= 64 && kBN <= 256, "wgmma N: 64 .. 256");
  static_assert(kSharedBytes <= kMaxSharedBytes, "stages and staging must fit shared memory");
};

template <int kBN>
__device__ __forceinline__ void wgmma_bf16(float (&acc)[kBN / 2], std::uint64_t a,
                                           std::uint64_t b) {
  if constexpr (kBN == 256) wgmma_m64n256k16_bf16(acc, a, b);
  if constexpr (kBN == 192) wgmma_m64n192k16_bf16(acc, a, b);
  if constexpr (kBN == 128) wgmma_m64n128k16_bf16(acc, a, b);
}

__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_tile, int half, int kk) {
  return swizzle128_descriptor(a_tile + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_tile, int kk) {
  return swizzle128_descriptor(b_tile + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

// --- the epilogue -------------------------------------------------------------------------------

// c = alpha * acc + beta * c for C[row][col], C[row][col + 1], as bf16, reading C only when
// beta != 0 and only inside the matrix (the pieces of C staged for a TMA store may overhang it;
// TMA clips what lies outside).
__device__ __forceinline__ __nv_bfloat162 scaled_pair(bf16 const* C, int ldc, int row, int col,
                                                      int m, int n, float acc0, float acc1,
                                                      float alpha, float beta) {
  float2 value = make_float2(alpha * acc0, alpha * acc1);
  if (beta != 0.0f && row < m && col < n) {
    bf16 const* old = C + static_cast<size_t>(row) * ldc + col;
    if (col + 1 < n) {  // col is even and ldc a multiple of 8: a 4-byte aligned pair
      float2 const pair = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 const*>(old));
      value.x += beta * pair.x;
      value.y += beta * pair.y;
    } else {
      value.x += beta * __bfloat162float(old[0]);
    }
  }
  return __float22bfloat162_rn(value);
}

// One consumer warpgroup's 64 x kWidth block of C at (first_row, first_col), from its wgmma
// accumulators. Piece by piece (64 x 64): wait until TMA has finished reading the staging buffer
// (its store two pieces ago), fill it, fence, and let one thread hand it to TMA. The 128-byte
// swizzle (16-byte chunk c of row r at chunk c ^ r % 8) is what the C map expects, and it spreads
// a warp's 32 four-byte writes over all 32 banks. `pieces` counts the pieces this warpgroup has
// staged: it picks the buffer. `barrier_id` is the warpgroup's named barrier.
template <int kWidth>
__device__ __forceinline__ void store_tile(CUtensorMap const* c_map, bf16 (&staging)[2][64 * 64],
                                           int& pieces, int barrier_id, bf16 const* C, int ldc,
                                           int m, int n, float alpha, float beta, int first_row,
                                           int first_col, float const (&acc)[kWidth / 2]) {
  int const lane = threadIdx.x % 32;
  int const row = (threadIdx.x / 32) % 4 * 16 + lane / 4;  // rows row and row + 8 of the 64
  int const t2 = (lane % 4) * 2;
  bool const leader = threadIdx.x % 128 == 0;  // issues and waits for the TMA stores
#pragma unroll
  for (int piece = 0; piece < kWidth / 64; ++piece, ++pieces) {
    bf16* const buffer = staging[pieces % 2];
    if (leader) bulk_wait_group_read<1>();
    named_barrier_sync(barrier_id, 128);
#pragma unroll
    for (int chunk = 0; chunk < 8; ++chunk) {
      int const j = piece * 8 + chunk;  // the accumulators' 8-column block
      int const col = first_col + j * 8 + t2;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int const r = row + 8 * half;
        __nv_bfloat162 const value =
            scaled_pair(C, ldc, first_row + r, col, m, n, acc[4 * j + 2 * half],
                        acc[4 * j + 2 * half + 1], alpha, beta);
        int const offset = r * 64 + (chunk ^ (r % 8)) * 8 + t2;  // in bf16
        *reinterpret_cast<__nv_bfloat162*>(buffer + offset) = value;
      }
    }
    fence_proxy_async_shared();
    named_barrier_sync(barrier_id, 128);
    if (leader) {
      tma_store_2d(c_map, gemm::shared_address(buffer), first_col + piece * 64, first_row);
      bulk_commit_group();
    }
  }
}

// --- the kernel ---------------------------------------------------------------------------------

template <int kBN, Epilogue kEpilogue>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    tma_store_epilogue_kernel(const __grid_constant__ CUtensorMap a_map,
                              const __grid_constant__ CUtensorMap b_map,
                              const __grid_constant__ CUtensorMap c_map, int m, int n, int k,
                              float alpha, float beta, bf16* __restrict__ C, int ldc) {
  using T = Tile<kBN>;
  constexpr int kStages = T::kStages;
  extern __shared__ unsigned char shared_bytes[];
  auto& shared = shared_storage<typename T::SharedStorage>(shared_bytes);
  StageRing<typename T::SharedStorage> const ring{shared};
  unsigned const rank = cluster_block_rank();
  int const pair_rows = gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster = blockIdx.x / kClusterSize;
  int const clusters = gridDim.x / kClusterSize;
  int const k_tiles = gemm::ceil_div(k, kBK);
  int const warpgroup = threadIdx.x / 128;
  // This block's tile of cluster tile `tile`: the pair's place in the grouped order, and the
  // block's own row of the pair.
  auto tile_of = [&](int tile, int& tile_m, int& tile_n) {
    int pair_m = 0;
    gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
    tile_m = pair_m * kClusterSize + static_cast<int>(rank);
  };

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(ring.full(stage), 1);
      mbarrier_init(ring.empty(stage), 4 * kConsumers * kClusterSize);
    }
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup == 0) {
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<kStages> write;
      for (int tile = cluster; tile < pair_rows * tiles_n; tile += clusters) {
        int tile_m = 0;
        int tile_n = 0;
        tile_of(tile, tile_m, tile_n);
        produce<T::kBoxes, kClusterSize>(ring, &a_map, &b_map, tile_m * kBM, tile_n * kBN, 0,
                                         k_tiles, rank, write);
      }
    }
  } else {
    claim_registers<kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    PipelineState<kStages> read;
    PipelineState<kStages> release;
    int pieces = 0;  // pieces of C this consumer has staged so far: picks the staging buffer
    for (int tile = cluster; tile < pair_rows * tiles_n; tile += clusters) {
      int tile_m = 0;
      int tile_n = 0;
      tile_of(tile, tile_m, tile_n);
      float acc[kBN / 2];
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i)
        acc[i] = 0.0f;
      consume_k_range<kClusterSize>(ring, 0, k_tiles, read, release, [&](int stage) {
#pragma unroll
        for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
          wgmma_bf16<kBN>(acc, a_descriptor(ring.a_tile(stage), consumer, kk),
                          b_descriptor(ring.b_tile(stage), kk));
        }
      });
      int const first_row = tile_m * kBM + consumer * 64;
      if constexpr (kEpilogue == Epilogue::kTmaStore) {
        store_tile<kBN>(&c_map, shared.staging[consumer], pieces, 1 + consumer, C, ldc, m, n, alpha,
                        beta, first_row, tile_n * kBN, acc);
      } else {
        store_accumulators<kBN, kEpilogue == Epilogue::kPairStores>(C, ldc, m, n, alpha, beta,
                                                                    first_row, tile_n * kBN, acc);
      }
    }
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && threadIdx.x % 128 == 0) bulk_wait_group<0>();
  }
  cluster_sync();
}

// --- the host -----------------------------------------------------------------------------------

// Step 23's choice of the tile width.
int choose_tile_width(int m, int n, int clusters) {
  int best_width = 256;
  long long best_cost = -1;
  for (int width : {256, 192, 128}) {
    long long const tiles =
        static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
        gemm::ceil_div(n, width);
    long long const rounds = (tiles + clusters - 1) / clusters;
    long long const cost = rounds * (width + 32);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best_width = width;
    }
  }
  return best_width;
}

template <int kBN, Epilogue kEpilogue>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map, int m,
            int n, int k, float alpha, float beta, bf16* C, int ldc, cudaStream_t stream) {
  constexpr int kSharedBytes = Tile<kBN>::kSharedBytes;
  constexpr auto kernel = tma_store_epilogue_kernel<kBN, kEpilogue>;
  gemm::opt_in_shared_memory<kernel>(kSharedBytes);
  check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
  static int const resident = resident_clusters(kernel, kClusterSize, kThreads, kSharedBytes);
  long long const cluster_tiles =
      static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
      gemm::ceil_div(n, kBN);
  long long const clusters = std::min<long long>(cluster_tiles, resident);
  kernel<<<static_cast<unsigned>(clusters * kClusterSize), kThreads, kSharedBytes, stream>>>(
      a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc);
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  if (static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int const sms = multiprocessor_count();
  int const width = choose_tile_width(m, n, std::max(1, sms / kClusterSize));
  AlignedOperand const a(A, m, k, lda, should_copy_a(A, lda, n), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  Epilogue epilogue = Epilogue::kSingleStores;
  CUtensorMap c_map{};  // unused by the direct stores
  // TMA stores need C's rows 16-byte aligned, and n a multiple of 8: at the right edge they write
  // whole 16-byte units (with n = 33 and ldc = 40, columns 33-39 too), and those columns are not
  // C's.
  if (rows_are_16_byte_aligned(C, ldc) && n % 8 == 0) {
    epilogue = Epilogue::kTmaStore;
    c_map = make_bf16_tensor_map(C, m, n, ldc, 64, kBoxN);
  } else if (rows_are_aligned<4>(C, ldc)) {
    epilogue = Epilogue::kPairStores;
  }
  dispatch_value<256, 192, 128>(width, [&](auto kWidth) {
    dispatch_value<Epilogue::kTmaStore, Epilogue::kPairStores, Epilogue::kSingleStores>(
        epilogue, [&](auto kEpilogue) {
          launch<kWidth(), kEpilogue()>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
        });
  });
  check_launch("bf16_gemm");
}
