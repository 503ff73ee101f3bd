// Exercise: step 19, warp specialization. Two TODO blocks, one per role: where the producer
// points TMA for each of B's boxes, and which rows of the tile a consumer warpgroup multiplies.
// The placeholders compile and run, and give wrong results: the GPU suite fails until both are
// right. The barrier protocol around them is the solution's; the README's exercises change it.
// Build and test: docs/teaching.md ("Exercise mode").
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "aligned_operand.cuh"
#include "async_copy.cuh"
#include "device_helpers.cuh"
#include "gemm.h"
#include "launch.h"
#include "mbarrier.cuh"
#include "tensor_map.h"
#include "tma.cuh"
#include "wgmma.cuh"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

// --- register budgets ---------------------------------------------------------------------------

// setmaxnreg: a warpgroup gives registers back to its block's pool (dec) or takes more from it
// (inc). Every warp of the warpgroup executes it; the count is a multiple of 8 in [24, 256].
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// The pool belongs to the block and holds what the block was given at launch: its threads times
// the registers per thread ptxas allocated. __launch_bounds__(threads, 1) lets ptxas allocate the
// SM's 65,536 split evenly, rounded down to the allocation unit of 8: 168 for 384 threads, 64,512
// in all. setmaxnreg.inc waits until the pool has enough, so budgets beyond that wait forever.
constexpr int launch_registers_per_thread(int threads) {
  return 65536 / threads / 8 * 8;
}

// The same check against the kernel as compiled, once, before its first launch.
template <auto kKernel>
void check_register_budgets(int threads, int producer, int consumer, int consumers) {
  static int const allocated = [] {
    cudaFuncAttributes attributes{};
    gemm::check_cuda(cudaFuncGetAttributes(&attributes, kKernel), "cudaFuncGetAttributes");
    return attributes.numRegs;
  }();
  int const budget = 128 * (producer + consumers * consumer);
  if (budget > threads * allocated) {
    throw std::runtime_error("bf16_gemm: the setmaxnreg budgets add up to " +
                             std::to_string(budget) + " registers, more than the " +
                             std::to_string(threads * allocated) + " the block has at launch");
  }
}

// --- the ring of stages -------------------------------------------------------------------------

// Where a walk around the ring of kStages stages is: the stage, and the parity of the phase its
// barriers are in on this pass (0 on the first pass, 1 on the second, ...).
template <int kStages>
struct PipelineState {
  int stage = 0;
  unsigned phase = 0;

  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// --- the tile -----------------------------------------------------------------------------------

constexpr int kBM = 128;       // block tile rows: 64 per consumer warpgroup
constexpr int kBN = 256;       // block tile columns: the N of one wgmma
constexpr int kBK = 64;        // k tile: 64 bf16 = one 128-byte swizzle span
constexpr int kStages = 4;     // 4 x 48 KB of the 227 KB a block may have
constexpr int kConsumers = 2;  // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 8;
constexpr int kBoxN = 64;  // B is copied in boxes 64 columns (128 bytes) wide
constexpr int kWgmmaK = 16;
// Register budgets after setmaxnreg: 128 x 40 + 256 x 232 = 64,512, all of the launch allocation.
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;

static_assert(kBK * 2 == 128, "a row of A's tile must be exactly one 128-byte swizzle span");
static_assert(kBM == 64 * kConsumers, "each consumer warpgroup owns 64 rows of the tile");
static_assert(128 * (kProducerRegisters + kConsumers * kConsumerRegisters) <=
                  kThreads * launch_registers_per_thread(kThreads),
              "the register budgets must fit what the block is given at launch");

// The block's shared memory. Each stage starts on a 1024-byte boundary, as the 128-byte swizzle
// wants: A's tile (kBM rows of 128 bytes), then B's tile (kBN / 64 boxes of kBK rows x 128 bytes).
struct SharedStorage {
  struct Stage {
    alignas(1024) bf16 a[kBM * kBK];  // 16 KB
    alignas(1024) bf16 b[kBK * kBN];  // 32 KB
  };
  Stage stages[kStages];
  std::uint64_t full[kStages];   // the producer's arrival + TMA's bytes
  std::uint64_t empty[kStages];  // one arrival per consumer warp
};
constexpr std::uint32_t kStageBytes = sizeof(SharedStorage::Stage);  // 48 KB
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;                // 8 KB
// 1024 bytes of slack to align the storage: dynamic shared memory is only 16-byte aligned.
constexpr int kSharedBytes = sizeof(SharedStorage) + 1024;

// The descriptors, as in step 18: A K-major (64-row half `half`, k step kk at +32 bytes per
// step), B N-major (k step kk at +16 rows of 128 bytes; 64-column boxes kBBoxBytes apart).
__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_tile, int half, int kk) {
  return swizzle128_descriptor(a_tile + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_tile, int kk) {
  return swizzle128_descriptor(b_tile + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

template <bool kPairs>
__global__ void __launch_bounds__(kThreads, 1)
    warp_specialized_kernel(const __grid_constant__ CUtensorMap a_map,
                            const __grid_constant__ CUtensorMap b_map, int m, int n, int k,
                            float alpha, float beta, bf16* __restrict__ C, int ldc) {
  extern __shared__ unsigned char shared_bytes[];
  std::uint32_t const base = gemm::shared_address(shared_bytes);
  SharedStorage& shared =
      *reinterpret_cast<SharedStorage*>(shared_bytes + (1024 - base % 1024) % 1024);
  auto a_tile = [&](int stage) { return gemm::shared_address(shared.stages[stage].a); };
  auto b_tile = [&](int stage) { return gemm::shared_address(shared.stages[stage].b); };
  auto full = [&](int stage) { return gemm::shared_address(&shared.full[stage]); };
  auto empty = [&](int stage) { return gemm::shared_address(&shared.empty[stage]); };

  int tile_m = 0;
  int tile_n = 0;
  gemm::grouped_tile(blockIdx.x, gemm::ceil_div(m, kBM), gemm::ceil_div(n, kBN), kGroupM, tile_m,
                     tile_n);
  int const block_row = tile_m * kBM;
  int const block_col = tile_n * kBN;
  int const k_tiles = gemm::ceil_div(k, kBK);
  int const warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(full(stage), 1);                // the producer's arrival (+ bytes)
      mbarrier_init(empty(stage), 4 * kConsumers);  // one arrival per consumer warp
    }
    fence_barrier_init();
  }
  __syncthreads();  // the last block-wide barrier: from here on the roles only meet at mbarriers

  if (warpgroup == 0) {
    // --- producer ---------------------------------------------------------------------------
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<kStages> write;
      for (int tile = 0; tile < k_tiles; ++tile, write.advance()) {
        // Wait until the consumers have handed the stage back. An mbarrier starts in phase 0,
        // still running; waiting for parity 1 (the phase "before" it) returns at once, so the
        // first pass around the ring does not wait. Then parity 0, 1, 0 ... per pass.
        mbarrier_wait(empty(write.stage), write.phase ^ 1);
        mbarrier_arrive_expect_bytes(full(write.stage), kStageBytes);
        tma_load_2d(a_tile(write.stage), &a_map, tile * kBK, block_row, full(write.stage));
        for (int box = 0; box < kBN / kBoxN; ++box) {
          // TODO(student): box `box` holds columns box * 64 .. box * 64 + 63 of B's tile: its
          // destination in the stage and its coordinates (column, then row) in B
          tma_load_2d(b_tile(write.stage), &b_map, block_col, tile * kBK,
                      full(write.stage));  // placeholder
          // END TODO
        }
      }
    }
    return;
  }

  // --- consumers ----------------------------------------------------------------------------
  claim_registers<kConsumerRegisters>();
  // TODO(student): which consumer this warpgroup is (0 or 1): it multiplies rows
  // 64 consumer .. 64 consumer + 63 of the tile
  int const consumer = 0;  // placeholder
  // END TODO
  int const lane = threadIdx.x % 32;
  float acc[128] = {};
  PipelineState<kStages> read;     // the stage the next wgmma read
  PipelineState<kStages> release;  // the stage to hand back next, one behind
  for (int tile = 0; tile < k_tiles; ++tile, read.advance()) {
    mbarrier_wait(full(read.stage), read.phase);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
      wgmma_m64n256k16_bf16(acc, a_descriptor(a_tile(read.stage), consumer, kk),
                            b_descriptor(b_tile(read.stage), kk));
    }
    wgmma_commit();
    // Keep this tile's wgmma running; once the previous tile's are done, hand its stage back.
    wgmma_wait<1>();
    if (tile > 0) {
      if (lane == 0) mbarrier_arrive(empty(release.stage));
      release.advance();
    }
  }
  wgmma_wait<0>();

  // Epilogue from the accumulators (layout in common/wgmma.cuh): warp w of this consumer holds
  // rows 16 w .. 16 w + 15 of its 64; float 4 j + {0, 1} is (row g, columns 8 j + 2 t, +1) and
  // 4 j + {2, 3} the same columns of row g + 8.
  int const warp = (threadIdx.x / 32) % 4;
  int const g = lane / 4;
  int const t2 = (lane % 4) * 2;
  int const row = block_row + consumer * 64 + warp * 16 + g;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    int const col = block_col + j * 8 + t2;
    if (row < m) {
      gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row) * ldc, col, n, acc[4 * j],
                                           acc[4 * j + 1], alpha, beta);
    }
    if (row + 8 < m) {
      gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row + 8) * ldc, col, n,
                                           acc[4 * j + 2], acc[4 * j + 3], alpha, beta);
    }
  }
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  long long const tiles = static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, kBN);
  if (tiles > 0x7fffffffLL) throw std::invalid_argument("bf16_gemm: too many tiles for one grid");
  AlignedOperand const a(A, m, k, lda, must_copy(A, lda), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  bool const pairs = rows_are_aligned<4>(C, ldc);
  dispatch_bool(pairs, [&](auto kPairs) {
    constexpr auto kernel = warp_specialized_kernel<kPairs()>;
    opt_in_shared_memory<kernel>(kSharedBytes);
    check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
    kernel<<<static_cast<unsigned>(tiles), kThreads, kSharedBytes, stream>>>(a_map, b_map, m, n, k,
                                                                             alpha, beta, C, ldc);
  });
  check_launch("bf16_gemm");
}
