// Step 44: the consumers take turns. Steps 31-40 hide the promotion behind the tensor cores inside
// each consumer: two chunks of accumulators take turns, so a k tile's wgmma run while the one
// before is added to the total. That costs a third set of accumulators: 216 of a consumer's 240
// registers at 144 columns, and a 64 x 144 block is the widest that fits. cuBLASLt keeps one chunk:
// a consumer waits for its k tile's wgmma, adds the chunk, then issues the next k tile into the
// same registers. That leaves the consumer's tensor-core work idle while it adds, and the other
// consumer must fill the gap. Here the two consumers issue their k tiles in turns, 0 then 1,
// ordered by two named barriers, so one consumer's wgmma run while the other adds. One chunk and
// the total make two sets, which leaves room for 192 or 208 columns, and the host picks the width
// with a model. The sums, their order and so C are step 40's, bit for bit.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
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
#include "tma.cuh"
#include "tma_store.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"
#include "workspace.h"

namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
using namespace gemm::hopper;

// --- the tile -----------------------------------------------------------------------------------

constexpr int kBM = 128;
constexpr int kBK = 128;         // one-byte elements: a 128-byte swizzled row
constexpr int kWgmmaK = 32;      // FP8 wgmma multiplies 32 deep (32 bytes, as bf16's 16)
constexpr int kConsumers = 2;    // each owns 64 rows of the 128
constexpr int kClusterSize = 2;  // stacked: the pair shares B, each block loads half its rows
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 4;
constexpr int kMaxSharedBytes = 227 * 1024;

// Everything that depends on the width kBN: 128, 192 or 208 columns.
template <int kBN>
struct Width {
  static_assert(kBN == 128 || kBN == 192 || kBN == 208, "the widths this step builds");
  // Two sets of accumulators, the chunk and the total: 208 registers at 208 columns.
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  static constexpr int kBHalfRows = kBN / kClusterSize;  // rows of B per block of the pair
  struct Stage {
    alignas(1024) std::uint8_t a[kBM * kBK];  // 16 KB: 128 rows of A, 128 bytes each
    alignas(1024) std::uint8_t b[kBN * kBK];  // kBN rows of B: 16, 24 or 26 KB
  };
  // Step 24's epilogue: two 64 x 64 staging buffers of C per consumer for the TMA stores (32 KB).
  static constexpr int kStagingBytes = kConsumers * 2 * 64 * 64 * 2;
  // As many stages as fit beside them, up to 6: 6 at 128 columns, 4 at 192 and 208.
  static constexpr int kStagesThatFit =
      (kMaxSharedBytes - kStagingBytes - 1024) / static_cast<int>(sizeof(Stage));
  static constexpr int kStages = std::min(6, kStagesThatFit);
  struct SharedStorage {
    Stage stages[kStages];
    alignas(1024) bf16 staging[kConsumers][2][64 * 64];
    std::uint64_t full[kStages];
    std::uint64_t empty[kStages];
  };
  static constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();
  static_assert(kSharedBytes <= kMaxSharedBytes, "the stages must fit shared memory");
  static_assert(kBHalfRows % 8 == 0, "each multicast half starts on a whole 1024-byte atom");
  static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
                "the register budgets must fit what the block is given at launch");
};

// One FP8 wgmma: D (64 x kBN, FP32) = A (64 x 32) * B (32 x kBN), both E4M3, plus D if `accumulate`
// is not 0. The first wgmma of a k tile passes accumulate = 0 (wgmma's scale-d operand), so a
// chunk never has to be cleared. One overload per width: the instruction names N.
__device__ __forceinline__ void wgmma_e4m3(float (&d)[64], std::uint64_t a_descriptor,
                                           std::uint64_t b_descriptor, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{" GEMM_WGMMA_REGS_64
      "}, %64, %65, accumulate, 1, 1;\n"
      "}\n"
      : GEMM_WGMMA_D_64
      : "l"(a_descriptor), "l"(b_descriptor), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_e4m3(float (&d)[96], std::uint64_t a_descriptor,
                                           std::uint64_t b_descriptor, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 "
      "{" GEMM_WGMMA_REGS_96
      "}, %96, %97, accumulate, 1, 1;\n"
      "}\n"
      : GEMM_WGMMA_D_96
      : "l"(a_descriptor), "l"(b_descriptor), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_e4m3(float (&d)[104], std::uint64_t a_descriptor,
                                           std::uint64_t b_descriptor, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %106, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n208k32.f32.e4m3.e4m3 "
      "{" GEMM_WGMMA_REGS_104
      "}, %104, %105, accumulate, 1, 1;\n"
      "}\n"
      : GEMM_WGMMA_D_104
      : "l"(a_descriptor), "l"(b_descriptor), "r"(accumulate));
}

// Both operands K-major with the 128-byte swizzle: the next 32 k are 32 bytes further along the
// rows, a consumer's 64 rows of A 64 x 128 bytes further down; rows come in 8-row atoms of 1024
// bytes (the stride), and the leading offset is unused. 208 rows of B are 26 whole atoms.
__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_tile, int consumer, int kk) {
  return swizzle128_descriptor(a_tile + consumer * 64 * kBK + kk * kWgmmaK, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_tile, int kk) {
  return swizzle128_descriptor(b_tile + kk * kWgmmaK, 16, 1024);
}

// --- the phases ---------------------------------------------------------------------------------

// The producer's loads of one output tile: A's 128 x 128-byte box, and this block's half of B's
// kBN rows, multicast to both blocks of the pair.
template <int kBN>
__device__ __forceinline__ void produce_tile(
    StageRing<typename Width<kBN>::SharedStorage> const& ring, CUtensorMap const* a_map,
    CUtensorMap const* b_map, int a_row, int b_row, int k_tiles, unsigned rank,
    PipelineState<Width<kBN>::kStages>& write) {
  constexpr int kHalf = Width<kBN>::kBHalfRows;
  for (int k_tile = 0; k_tile < k_tiles; ++k_tile, write.advance()) {
    mbarrier_wait(ring.empty(write.stage), write.phase ^ 1);
    mbarrier_arrive_expect_bytes(ring.full(write.stage), sizeof(typename Width<kBN>::Stage));
    tma_load_2d(ring.a_tile(write.stage), a_map, k_tile * kBK, a_row, ring.full(write.stage));
    tma_load_2d_multicast(ring.b_tile(write.stage) + rank * kHalf * kBK, b_map, k_tile * kBK,
                          b_row + static_cast<int>(rank) * kHalf, ring.full(write.stage),
                          (1u << kClusterSize) - 1);
  }
}

// Issues one k tile's 4 wgmma into `chunk` as one commit group and returns its stage. This step:
// the stage's two descriptors are built once; the next 32 k of both operands are 32 bytes further
// along their rows, +2 in the start field (units of 16 bytes). The field holds shared addresses up
// to 256 KB, so the sum stays inside it and never carries into the fields above.
template <int kBN>
__device__ __forceinline__ int issue_k_tile(
    StageRing<typename Width<kBN>::SharedStorage> const& ring, int consumer,
    PipelineState<Width<kBN>::kStages>& read, float (&chunk)[kBN / 2]) {
  int const stage = read.stage;
  mbarrier_wait(ring.full(stage), read.phase);
  wgmma_fence();  // the adds that last read `chunk` come before these wgmma
  std::uint64_t const a_first = a_descriptor(ring.a_tile(stage), consumer, 0);
  std::uint64_t const b_first = b_descriptor(ring.b_tile(stage), 0);
#pragma unroll
  for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
    wgmma_e4m3(chunk, a_first + kk * (kWgmmaK / 16), b_first + kk * (kWgmmaK / 16), kk);
  }
  wgmma_commit();
  read.advance();
  return stage;
}

// Hands a stage back to both blocks of the pair: one arrival per warp on each block's barrier.
template <class Ring>
__device__ __forceinline__ void release_stage(Ring const& ring, int stage) {
  if (threadIdx.x % 32 == 0) {
    for (unsigned rank = 0; rank < kClusterSize; ++rank)
      mbarrier_arrive_cluster(ring.empty(stage), rank);
  }
}

// Promotion: FP32 additions, rounded to nearest.
template <int kCount>
__device__ __forceinline__ void promote(float (&total)[kCount], float const (&chunk)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i)
    total[i] += chunk[i];
}

// The turns: consumer 0 issues a k tile, then consumer 1 the same k tile, then consumer 0 the next,
// and so on across every tile of the kernel. Each waits at one named barrier for the other's last
// issue and arrives at the other once it has issued (bar.arrive does not wait). Consumer 1 arrives
// once before its first turn, as if it had issued, and consumer 0 waits once more after its last
// turn, for consumer 1's last arrival, so that every barrier's arrivals pair up.
constexpr int kIssuedBy0 = 3;  // named barriers 1 and 2 are the consumers' own, in the epilogue
constexpr int kIssuedBy1 = 4;
constexpr int kBothConsumers = 2 * 128;

__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Issues one k tile in this consumer's turn.
template <int kBN>
__device__ __forceinline__ int issue_in_turn(
    StageRing<typename Width<kBN>::SharedStorage> const& ring, int consumer,
    PipelineState<Width<kBN>::kStages>& read, float (&chunk)[kBN / 2]) {
  named_barrier_sync(consumer == 0 ? kIssuedBy1 : kIssuedBy0, kBothConsumers);
  int const stage = issue_k_tile<kBN>(ring, consumer, read, chunk);
  named_barrier_arrive(consumer == 0 ? kIssuedBy0 : kIssuedBy1, kBothConsumers);
  return stage;
}

// A consumer's 64 x kBN block of one output tile, summed over all k tiles into `total`. One chunk:
// each k tile waits for the wgmma of the k tile before, hands its stage back, adds the chunk to the
// total, and only then issues its own wgmma into the same chunk. While this consumer waits and
// adds, the wgmma the other consumer issued in its turn keep the tensor cores busy.
template <int kBN>
__device__ __forceinline__ void consume_tile(
    StageRing<typename Width<kBN>::SharedStorage> const& ring, int consumer, int k_tiles,
    PipelineState<Width<kBN>::kStages>& read, float (&total)[kBN / 2]) {
  float chunk[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) {
    total[i] = 0.0f;
    chunk[i] = 0.0f;  // never read (each k tile's first wgmma overwrites), but defined
  }
  int stage = issue_in_turn<kBN>(ring, consumer, read, chunk);
  for (int k_tile = 1; k_tile < k_tiles; ++k_tile) {
    wgmma_wait<0>();  // the k tile before is done: its stage and its chunk are free
    release_stage(ring, stage);
    promote(total, chunk);
    stage = issue_in_turn<kBN>(ring, consumer, read, chunk);
  }
  wgmma_wait<0>();
  release_stage(ring, stage);
  promote(total, chunk);
}

// --- the epilogue -------------------------------------------------------------------------------

// The last 16 columns of a 208-wide tile, as one more piece after store_tile's three: alpha * acc +
// beta * C for accumulator blocks 24 and 25 (columns 192-207 of the tile), staged in the next
// buffer and stored through `c_map16`, whose 64 x 16 boxes are unswizzled: row r of the piece is
// the 32 bytes at r x 32, and a thread's pair of columns c, c + 1 sits at r x 16 + c in bf16.
// Step 39's piece for a 144-wide tile, four blocks further on.
__device__ __forceinline__ void store_last_16_columns(CUtensorMap const* c_map16,
                                                      bf16 (&staging)[2][64 * 64], int& pieces,
                                                      int barrier_id, bf16 const* C, int ldc, int m,
                                                      int n, float alpha, float beta, int first_row,
                                                      int first_col, float const (&acc)[104]) {
  int const lane = threadIdx.x % 32;
  int const row = (threadIdx.x / 32) % 4 * 16 + lane / 4;  // rows row and row + 8 of the 64
  int const t2 = (lane % 4) * 2;
  bool const leader = threadIdx.x % 128 == 0;  // issues and waits for the TMA stores
  bf16* const buffer = staging[pieces % 2];
  if (leader) bulk_wait_group_read<1>();  // the store two pieces ago has read this buffer
  named_barrier_sync(barrier_id, 128);
#pragma unroll
  for (int block = 0; block < 2; ++block) {
    int const j = 24 + block;  // the accumulators' 8-column block
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int const r = row + 8 * half;
      __nv_bfloat162 const value =
          scaled_pair(C, ldc, first_row + r, first_col + block * 8 + t2, m, n,
                      acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1], alpha, beta);
      *reinterpret_cast<__nv_bfloat162*>(buffer + r * 16 + block * 8 + t2) = value;
    }
  }
  fence_proxy_async_shared();
  named_barrier_sync(barrier_id, 128);
  if (leader) {
    tma_store_2d(c_map16, gemm::shared_address(buffer), first_col, first_row);
    bulk_commit_group();
  }
  ++pieces;
}

// --- the kernel ---------------------------------------------------------------------------------

// How C is written, as in step 24: TMA stores where C is a legal TMA operand (16-byte-aligned rows
// and n a multiple of 8), else direct stores, in pairs where C's rows are 4-byte aligned.
enum class Epilogue { kTmaStore, kPairStores, kSingleStores };

template <int kBN, Epilogue kEpilogue>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    taking_turns_kernel(const __grid_constant__ CUtensorMap a_map,
                        const __grid_constant__ CUtensorMap b_map,
                        const __grid_constant__ CUtensorMap c_map,
                        const __grid_constant__ CUtensorMap c_map16, int m, int n, int k,
                        float alpha, float const* __restrict__ a_scale,
                        float const* __restrict__ b_scale, float beta, bf16* __restrict__ C,
                        int ldc) {
  using W = Width<kBN>;
  constexpr int kStages = W::kStages;
  extern __shared__ unsigned char shared_bytes[];
  auto& shared = shared_storage<typename W::SharedStorage>(shared_bytes);
  StageRing<typename W::SharedStorage> const ring{shared};
  unsigned const rank = cluster_block_rank();
  int const pair_rows = gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster = blockIdx.x / kClusterSize;
  int const clusters = gridDim.x / kClusterSize;
  int const k_tiles = gemm::ceil_div(k, kBK);
  int const warpgroup = threadIdx.x / 128;
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
    release_registers<W::kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<kStages> write;
      for (int tile = cluster; tile < pair_rows * tiles_n; tile += clusters) {
        int tile_m = 0;
        int tile_n = 0;
        tile_of(tile, tile_m, tile_n);
        produce_tile<kBN>(ring, &a_map, &b_map, tile_m * kBM, tile_n * kBN, k_tiles, rank, write);
      }
    }
  } else {
    claim_registers<W::kConsumerRegisters>();
    // Step 38: read from lane 0, so that ptxas keeps the descriptors in uniform registers.
    int const consumer = __shfl_sync(0xffffffffu, warpgroup - 1, 0);
    // The scales are read once: the product's scale joins alpha.
    float const scaled_alpha = alpha * (*a_scale * *b_scale);
    PipelineState<kStages> read;
    // Consumer 1 counts as having issued before consumer 0's first turn (see issue_in_turn).
    if (consumer == 1) named_barrier_arrive(kIssuedBy1, kBothConsumers);
    int pieces = 0;  // pieces of C this consumer has staged so far: picks the staging buffer
    for (int tile = cluster; tile < pair_rows * tiles_n; tile += clusters) {
      int tile_m = 0;
      int tile_n = 0;
      tile_of(tile, tile_m, tile_n);
      float total[kBN / 2];
      consume_tile<kBN>(ring, consumer, k_tiles, read, total);
      int const first_row = tile_m * kBM + consumer * 64;
      int const first_col = tile_n * kBN;
      if constexpr (kEpilogue == Epilogue::kTmaStore) {
        // The first kBN / 64 x 64 columns as step 24 stores them, in 64 x 64 pieces. Their
        // accumulators come first in `total` (the layout runs along the columns, 8 at a time).
        constexpr int kWhole = kBN / 64 * 64;
        store_tile<kWhole>(&c_map, shared.staging[consumer], pieces, 1 + consumer, C, ldc, m, n,
                           scaled_alpha, beta, first_row, first_col,
                           reinterpret_cast<float const(&)[kWhole / 2]>(total));
        if constexpr (kBN == 208) {
          store_last_16_columns(&c_map16, shared.staging[consumer], pieces, 1 + consumer, C, ldc, m,
                                n, scaled_alpha, beta, first_row, first_col + 192, total);
        }
      } else {
        store_accumulators<kBN, kEpilogue == Epilogue::kPairStores>(
            C, ldc, m, n, scaled_alpha, beta, first_row, first_col, total);
      }
    }
    // Consumer 1's arrival after its last turn, taken back.
    if (consumer == 0) named_barrier_sync(kIssuedBy1, kBothConsumers);
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && threadIdx.x % 128 == 0) bulk_wait_group<0>();
  }
  cluster_sync();
}

// --- the host -----------------------------------------------------------------------------------

// How many clusters of the kernel of width kBN fit on the GPU at once (one block per SM).
template <int kBN>
int resident_clusters_of() {
  using W = Width<kBN>;
  constexpr auto kernel = taking_turns_kernel<kBN, Epilogue::kTmaStore>;
  gemm::opt_in_shared_memory<kernel>(W::kSharedBytes);
  static int const resident = resident_clusters(kernel, kClusterSize, kThreads, W::kSharedBytes);
  return resident;
}

// The model: a call takes as many rounds as its cluster tiles need of the resident clusters, and a
// round lasts in proportion to the tile's width plus an overhead worth 32 columns (the fill and
// drain of each tile, its epilogue), as in step 26's model for BF16. Of two widths that cost the
// same, the wider.
constexpr int kWidths[] = {208, 192, 128};
constexpr int kOverheadColumns = 32;
constexpr int kWidthCount = static_cast<int>(std::size(kWidths));
int choose_width(int m, int n, int const (&resident)[kWidthCount]) {
  long long const pair_rows = gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize);
  int best = kWidths[0];
  long long best_cost = -1;
  for (int i = 0; i < kWidthCount; ++i) {
    long long const cluster_tiles = pair_rows * gemm::ceil_div(n, kWidths[i]);
    long long const rounds = gemm::ceil_div(cluster_tiles, static_cast<long long>(resident[i]));
    long long const cost = rounds * (kWidths[i] + kOverheadColumns);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = kWidths[i];
    }
  }
  return best;
}

template <int kBN, Epilogue kEpilogue>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map,
            CUtensorMap const& c_map16, int m, int n, int k, float alpha, float const* a_scale,
            float const* b_scale, float beta, bf16* C, int ldc, cudaStream_t stream) {
  using W = Width<kBN>;
  constexpr auto kernel = taking_turns_kernel<kBN, kEpilogue>;
  gemm::opt_in_shared_memory<kernel>(W::kSharedBytes);
  check_register_budgets<kernel>(kThreads, W::kProducerRegisters, W::kConsumerRegisters,
                                 kConsumers);
  long long const cluster_tiles =
      static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
      gemm::ceil_div(n, kBN);
  long long const clusters = std::min<long long>(cluster_tiles, resident_clusters_of<kBN>());
  kernel<<<static_cast<unsigned>(clusters * kClusterSize), kThreads, W::kSharedBytes, stream>>>(
      a_map, b_map, c_map, c_map16, m, n, k, alpha, a_scale, b_scale, beta, C, ldc);
}

}  // namespace

void gemm::fp8_gemm(int m, int n, int k, float alpha, fp8 const* A, int lda, fp8 const* B, int ldb,
                    float const* a_scale, float const* b_scale, float beta, bf16* C, int ldc,
                    cudaStream_t stream) {
  check_fp8_gemm_arguments("fp8_gemm", m, n, k, A, lda, B, ldb, a_scale, b_scale, C, ldc);
  if (static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("fp8_gemm: too many tiles");
  }
  AlignedFp8Operand const a(A, m, k, lda, stream);
  AlignedFp8Operand const b(B, n, k, ldb, stream);
  check_launch("fp8_gemm");
  int const resident[kWidthCount] = {resident_clusters_of<208>(), resident_clusters_of<192>(),
                                     resident_clusters_of<128>()};  // in the order of kWidths
  int const width = choose_width(m, n, resident);
  CUtensorMap const a_map = make_fp8_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_fp8_tensor_map(b.data(), n, k, b.ld(), width / kClusterSize, kBK);
  Epilogue epilogue = Epilogue::kSingleStores;
  CUtensorMap c_map{};    // unused by the direct stores
  CUtensorMap c_map16{};  // used by the TMA stores of 208-wide tiles only
  if (rows_are_16_byte_aligned(C, ldc) && n % 8 == 0) {
    epilogue = Epilogue::kTmaStore;
    c_map = make_bf16_tensor_map(C, m, n, ldc, 64, 64);
    if (width == 208) {
      c_map16 = make_bf16_tensor_map(C, m, n, ldc, 64, 16, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                     CU_TENSOR_MAP_SWIZZLE_NONE);
    }
  } else if (rows_are_aligned<4>(C, ldc)) {
    epilogue = Epilogue::kPairStores;
  }
  dispatch_value<128, 192, 208>(width, [&](auto kBN) {
    dispatch_value<Epilogue::kTmaStore, Epilogue::kPairStores, Epilogue::kSingleStores>(
        epilogue, [&](auto kEpilogue) {
          launch<kBN(), kEpilogue()>(a_map, b_map, c_map, c_map16, m, n, k, alpha, a_scale, b_scale,
                                     beta, C, ldc, stream);
        });
  });
  check_launch("fp8_gemm");
}
