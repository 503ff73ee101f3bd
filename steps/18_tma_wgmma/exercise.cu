// Exercise: step 18, TMA and wgmma. Two TODO blocks, both where the shared-memory layout TMA
// writes meets the layout wgmma reads: the descriptor of B's tile (its two byte offsets) and the
// row of C an accumulator register belongs to. The placeholders compile and run, and give wrong
// results: the GPU suite fails until both are right. The README and docs/09_hopper_primer.md
// (the descriptor) have everything needed.
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
#include "hang_check.cuh"
#include "launch.h"
#include "tensor_map.h"

namespace {

using bf16 = __nv_bfloat16;

// --- mbarrier -----------------------------------------------------------------------------------
// A 64-bit barrier object in shared memory that counts arrivals *and* bytes: a thread announces
// how many bytes a copy will bring (expect_tx), the copy engine counts them off as they land, and
// the barrier's phase completes when both counts reach zero. Waiting means "until the phase of
// this parity has completed" (0 for the first phase, 1 for the second, 0 again ...).

// `arrivals` threads must arrive (besides the bytes announced) before a phase completes.
__device__ __forceinline__ void mbarrier_init(std::uint32_t barrier, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals));
}

// Makes initialized barriers visible to the other threads and to the copy engine; a
// __syncthreads() must follow before anyone uses them.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival, announcing that `bytes` more bytes will land before the phase may complete.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(std::uint32_t barrier,
                                                             unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes)
               : "memory");
}

// Whether the phase of parity `parity` has completed. try_wait suspends the thread for a while
// before it answers "not yet", so a loop around it does not spin at full speed.
__device__ __forceinline__ bool mbarrier_try_wait(std::uint32_t barrier, unsigned parity) {
  unsigned done = 0;
  asm volatile(
      "{\n"
      ".reg .pred complete;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
      "selp.u32 %0, 1, 0, complete;\n"
      "}\n"
      : "=r"(done)
      : "r"(barrier), "r"(parity)
      : "memory");
  return done != 0;
}

// Waits until the phase of parity `parity` has completed. In the debug build
// (common/hang_check.cuh) a wait that never completes reports itself and traps.
__device__ __forceinline__ void mbarrier_wait(std::uint32_t barrier, unsigned parity) {
  if constexpr (gemm::kDebugHangs) {
    for (unsigned tries = 1; !mbarrier_try_wait(barrier, parity); ++tries) {
      if (tries == gemm::kHangTries) gemm::report_hang(barrier, parity);
    }
  } else {
    while (!mbarrier_try_wait(barrier, parity)) {
    }
  }
}

// --- TMA ----------------------------------------------------------------------------------------
// Copies the box at coordinates (inner, outer) of `map` (inner = the contiguous dimension) to
// shared address `destination`; the bytes count off on `barrier`. The tensor map must live in
// kernel parameter space (a const __grid_constant__ parameter) or in global memory.
__device__ __forceinline__ void tma_load_2d(std::uint32_t destination, CUtensorMap const* map,
                                            int inner, int outer, std::uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(destination),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(barrier)
      : "memory");
}

// --- wgmma --------------------------------------------------------------------------------------
// A shared-memory matrix descriptor for a tile stored with the 128-byte swizzle (what TMA writes
// with CU_TENSOR_MAP_SWIZZLE_128B): bits 0-13 the start address, 16-29 the "leading" byte offset,
// 32-45 the "stride" byte offset (all three in units of 16 bytes), bits 49-51 the base offset
// (where the start lies in the swizzle pattern, which repeats every 1024 bytes: 0 for a tile that
// starts 1024-byte aligned, as every tile here does), bits 62-63 the swizzle mode (1 = 128 bytes).
// A start inside the tile (the next 16 k of a K-major tile are 32 bytes further) is fine: the
// hardware swizzles the final addresses.
__device__ __forceinline__ std::uint64_t swizzle128_descriptor(std::uint32_t start,
                                                               std::uint32_t leading_bytes,
                                                               std::uint32_t stride_bytes) {
  return static_cast<std::uint64_t>((start & 0x3FFFF) >> 4) |
         static_cast<std::uint64_t>(leading_bytes >> 4) << 16 |
         static_cast<std::uint64_t>(stride_bytes >> 4) << 32 | 1ull << 62;
}

// Orders this thread's earlier register accesses before the wgmma that follow (the accumulators
// are registers wgmma reads and writes asynchronously).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

// Closes the wgmma issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most `kPending` committed groups are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// D (64 x 128, FP32, 64 registers per thread) += A (64 x 16) * B (16 x 128), bf16, both from
// shared memory. The trailing immediates: scale-d = 1 (accumulate), scale-a = scale-b = 1, A not
// transposed (K-major: a row of the row-major A is contiguous along k), B transposed (N-major: a
// row of the row-major B is contiguous along n). Warp w of the warpgroup owns rows 16 w .. 16 w +
// 15 of D; within them each 8-column block j is laid out as one mma.sync m16n8 tile: with g =
// lane / 4 and t = lane % 4, floats 4 j + 0, 1 are row g, columns 8 j + 2 t, +1, and floats
// 4 j + 2, 3 are row g + 8, the same columns.
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], std::uint64_t a_descriptor,
                                                      std::uint64_t b_descriptor) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, 1, 1, 1, 0, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(a_descriptor), "l"(b_descriptor));
}

// --- the kernel ---------------------------------------------------------------------------------

constexpr int kBM = 128;       // block tile rows: two wgmma of 64 rows
constexpr int kBN = 128;       // block tile columns: the N of one wgmma
constexpr int kBK = 64;        // k tile: 64 bf16 = 128 bytes, one swizzle span per row of A
constexpr int kStages = 4;     // shared buffers in the ring
constexpr int kThreads = 128;  // one warpgroup
constexpr int kGroupM = 8;     // grouped block order (step 13)
constexpr int kBoxN = 64;      // B is copied in boxes 64 columns (128 bytes) wide
constexpr int kWgmmaK = 16;    // k per wgmma

// Shared memory per stage. A's tile: kBM rows of 128 bytes, as TMA writes it (row r at
// r * 128 bytes, its 16-byte chunks swizzled within each group of 8 rows). B's tile: two boxes
// of kBK rows x 64 columns, one after the other (columns 0-63, then 64-127).
constexpr std::uint32_t kABytes = kBM * kBK * 2;               // 16 KB
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;          // 8 KB
constexpr std::uint32_t kBBytes = kBBoxBytes * (kBN / kBoxN);  // 16 KB
constexpr std::uint32_t kStageBytes = kABytes + kBBytes;
// The stages, then one 8-byte mbarrier per stage, plus 1 KB to align the tiles to 1024 bytes.
constexpr int kSharedBytes = kStages * kStageBytes + kStages * 8 + 1024;

static_assert(kBK * 2 == 128, "a row of A's tile must be exactly one 128-byte swizzle span");
static_assert(kBN % kBoxN == 0, "B's tile is a whole number of 64-column boxes");

// The descriptors of the k step kk (16 deep) of a stage, for wgmma.
//
// A is K-major: row r of the tile is 128 contiguous bytes (64 k). A 64-row half of the tile
// starts 64 * 128 bytes further; k step kk starts kk * 32 bytes into each row (the hardware
// applies the swizzle to the final address). Groups of 8 rows are 1024 bytes apart (the
// "stride" offset); the "leading" offset is unused for a swizzled K-major operand.
//
// B is N-major: row k of a box is 64 contiguous columns (128 bytes). k step kk starts kk * 16
// rows = 2048 bytes further. Groups of 8 k rows are 1024 bytes apart (the stride offset), and
// the next 64 columns are in the next box, kBBoxBytes further (the leading offset).
__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_stage, int half, int kk) {
  return swizzle128_descriptor(a_stage + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_stage, int kk) {
  // TODO(student): B's tile is N-major: which byte offset is the distance to the next 64
  // columns (the next box), which the distance to the next 8 k rows? (leading, then stride)
  return swizzle128_descriptor(b_stage + kk * kWgmmaK * 128, 1024, 1024);  // placeholder
  // END TODO
}

template <bool kPairs>
__global__ void __launch_bounds__(kThreads, 1)
    tma_wgmma_kernel(const __grid_constant__ CUtensorMap a_map,
                     const __grid_constant__ CUtensorMap b_map, int m, int n, int k, float alpha,
                     float beta, bf16* __restrict__ C, int ldc) {
  extern __shared__ unsigned char shared_bytes[];
  // 128-byte-swizzled tiles must start on a 1024-byte boundary; dynamic shared memory is only
  // guaranteed 16-byte alignment, so round up (kSharedBytes has the slack).
  std::uint32_t const shared_base = (gemm::shared_address(shared_bytes) + 1023) & ~1023u;
  auto a_stage = [&](int stage) { return shared_base + stage * kStageBytes; };
  auto b_stage = [&](int stage) { return shared_base + stage * kStageBytes + kABytes; };
  auto full = [&](int stage) { return shared_base + kStages * kStageBytes + stage * 8; };

  int tile_m = 0;
  int tile_n = 0;
  gemm::grouped_tile(blockIdx.x, gemm::ceil_div(m, kBM), gemm::ceil_div(n, kBN), kGroupM, tile_m,
                     tile_n);
  int const block_row = tile_m * kBM;
  int const block_col = tile_n * kBN;
  int const k_tiles = gemm::ceil_div(k, kBK);

  // One barrier per stage, "full": thread 0 arrives once (with the byte count) and TMA brings
  // the bytes; the phase completes when the whole k tile has landed.
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage)
      mbarrier_init(full(stage), 1);
    fence_barrier_init();
  }
  __syncthreads();

  // Thread 0 starts the copies of k tile `tile` into its stage: A's 128 x 64 box and B's two
  // 64 x 64 boxes. Boxes reaching past m, n or k are zero-filled by TMA and still deliver their
  // full byte count, so the expected count is always the same.
  auto start_tile = [&](int tile) {
    int const stage = tile % kStages;
    mbarrier_arrive_expect_bytes(full(stage), kStageBytes);
    tma_load_2d(a_stage(stage), &a_map, tile * kBK, block_row, full(stage));
    for (int box = 0; box < kBN / kBoxN; ++box) {
      tma_load_2d(b_stage(stage) + box * kBBoxBytes, &b_map, block_col + box * kBoxN, tile * kBK,
                  full(stage));
    }
  };
  if (threadIdx.x == 0) {
    for (int tile = 0; tile < kStages - 1 && tile < k_tiles; ++tile)
      start_tile(tile);
  }

  // Rows 0-63 and 64-127 of the tile: 64 floats per thread each (layout at wgmma_m64n128k16_bf16).
  float acc[2][64] = {};

  for (int tile = 0; tile < k_tiles; ++tile) {
    int const stage = tile % kStages;
    // The stage's phase flips once per pass around the ring: parity 0 on the first pass.
    mbarrier_wait(full(stage), (tile / kStages) % 2);

    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
      std::uint64_t const b = b_descriptor(b_stage(stage), kk);
      wgmma_m64n128k16_bf16(acc[0], a_descriptor(a_stage(stage), 0, kk), b);
      wgmma_m64n128k16_bf16(acc[1], a_descriptor(a_stage(stage), 1, kk), b);
    }
    wgmma_commit();
    // Let this tile's wgmma run while waiting for the previous tile's: once those are done (in
    // every warp: the barrier), the previous tile's stage is free and thread 0 refills it with
    // the tile kStages - 1 ahead.
    wgmma_wait<1>();
    __syncthreads();
    if (threadIdx.x == 0 && tile + kStages - 1 < k_tiles) start_tile(tile + kStages - 1);
  }
  wgmma_wait<0>();

  // Epilogue, straight from the accumulator registers: warp w holds rows 16 w .. 16 w + 15 of
  // each 64-row half; float 4 j + {0, 1} is (row g, columns 8 j + 2 t, +1), 4 j + {2, 3} the
  // same columns of row g + 8.
  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int const g = lane / 4;
  int const t2 = (lane % 4) * 2;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // TODO(student): the row of C that floats 4 j + 0 and 4 j + 1 of acc[half] belong to
    int const row = block_row + half * 64 + warp * 8 + g;  // placeholder
                                                           // END TODO
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      int const col = block_col + j * 8 + t2;
      if (row < m) {
        gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row) * ldc, col, n,
                                             acc[half][4 * j], acc[half][4 * j + 1], alpha, beta);
      }
      if (row + 8 < m) {
        gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row + 8) * ldc, col, n,
                                             acc[half][4 * j + 2], acc[half][4 * j + 3], alpha,
                                             beta);
      }
    }
  }
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  long long const tiles = static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, kBN);
  if (tiles > 0x7fffffffLL) throw std::invalid_argument("bf16_gemm: too many tiles for one grid");
  // Operands TMA cannot describe (odd leading dimension, unaligned base) are first copied into
  // aligned rows (common/aligned_operand.cuh; step 22 explains the copy).
  AlignedOperand const a(A, m, k, lda, must_copy(A, lda), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  bool const pairs = rows_are_aligned<4>(C, ldc);
  dispatch_bool(pairs, [&](auto kPairs) {
    constexpr auto kernel = tma_wgmma_kernel<kPairs()>;
    opt_in_shared_memory<kernel>(kSharedBytes);
    kernel<<<static_cast<unsigned>(tiles), kThreads, kSharedBytes, stream>>>(a_map, b_map, m, n, k,
                                                                             alpha, beta, C, ldc);
  });
  check_launch("bf16_gemm");
}
