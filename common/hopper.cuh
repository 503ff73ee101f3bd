// Hopper's (sm_90a) asynchronous machinery, as PTX, for steps 17 and later:
//
//   mbarrier   a 64-bit barrier object in shared memory that counts arrivals *and* bytes: a
//              thread announces how many bytes a copy will bring (expect_tx), the copy engine
//              counts them off as they land, and the barrier's phase flips when both reach
//              zero. Waiting means "until the phase with this parity has completed".
//   TMA        the Tensor Memory Accelerator: one thread hands it a tensor map (built on the
//              host, see tensor_map.h) and a box coordinate; it copies the whole box from
//              global to shared memory, swizzled, zero-filling what lies outside the matrix,
//              and signals an mbarrier when done.
//   wgmma      warpgroup MMA: the 4 warps of a warpgroup (128 threads) together multiply a
//              64 x N x 16 block, A and B read straight from shared memory through 64-bit
//              matrix descriptors, the accumulators in registers, asynchronously: issue,
//              commit as a group, and wait for the group later.
//
// Everything here compiles only for sm_90a (-gencode=arch=compute_90a,code=sm_90a).
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

namespace gemm::hopper {

// --- mbarrier -----------------------------------------------------------------------------------

// `arrivals` threads must arrive (besides the bytes announced) before the phase completes.
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

// One plain arrival.
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}

// Spins until the phase of parity `parity` (0 for the first, 1 for the second, 0 again ...)
// has completed. try_wait itself suspends the thread for a while before it reports "not yet".
__device__ __forceinline__ void mbarrier_wait(std::uint32_t barrier, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n"
        "}\n"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
  } while (!done);
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

// The multicast form (step 20 and later): the same box lands at the same shared offset in every
// block of the cluster named in `cta_mask` (bit r = the block of cluster rank r), and each
// landing counts off on the barrier at `barrier`'s offset in that block.
__device__ __forceinline__ void tma_load_2d_multicast(std::uint32_t destination,
                                                      CUtensorMap const* map, int inner, int outer,
                                                      std::uint32_t barrier,
                                                      std::uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(destination),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(barrier), "h"(cta_mask)
      : "memory");
}

// The reverse direction (step 21): copies the box at shared address `source` to coordinates
// (inner, outer) of `map`, clipping what lies outside the matrix. The copy runs on after the
// call returns: bulk_commit_group closes the copies issued so far into a group, and
// bulk_wait_group_read<N> waits until at most N groups still *read* shared memory (the buffer
// may then be rewritten); bulk_wait_group<N> waits until their writes to global memory are done.
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

// Shared memory written by ordinary stores that the copy engine reads next (a TMA store's
// source) must be made visible to it, the "async proxy", first: every writing thread fences,
// then the threads synchronize, then one thread issues the copy.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A barrier among `threads` threads (a multiple of 32) of the block, numbered `id` (1-15; 0 is
// __syncthreads'): lets one warpgroup synchronize without stopping the others.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// --- clusters -----------------------------------------------------------------------------------

// A thread block cluster (step 20 and later) is a group of blocks the hardware runs at the same
// time on neighbouring SMs; each can reach the others' shared memory and barriers.

// This block's rank in its cluster: 0 .. cluster size - 1.
__device__ __forceinline__ unsigned cluster_block_rank() {
  unsigned rank = 0;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Every thread of every block of the cluster arrives, then waits for all the others: a
// __syncthreads() across the cluster, with release/acquire ordering at cluster scope.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}

// One arrival on the barrier at shared address `barrier`, but in the block of cluster rank
// `rank` (mapa translates a local shared address to the same offset in another block). The
// arrival keeps mbarrier.arrive's default ordering, as CUTLASS's ClusterBarrier does: what it
// releases is a stage whose wgmma have completed (wgmma_wait), nothing the other block must see.
// Spelling out .release.cluster made step 20 2.3x slower on the H100 (docs/results).
__device__ __forceinline__ void mbarrier_arrive_cluster(std::uint32_t barrier, unsigned rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(barrier),
      "r"(rank)
      : "memory");
}

// --- register reallocation ----------------------------------------------------------------------

// setmaxnreg: a warpgroup gives registers back to the SM's pool (dec) or takes more from it
// (inc), so that warpgroups with different roles can have different register budgets. Every
// warp of the warpgroup must execute it; the count is a multiple of 8 in [24, 256].
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// --- wgmma --------------------------------------------------------------------------------------

// A shared-memory matrix descriptor for a tile stored with the 128-byte swizzle (what TMA
// writes with CU_TENSOR_MAP_SWIZZLE_128B): bits 0-13 the start address, 16-29 the "leading"
// byte offset, 32-45 the "stride" byte offset (all three in units of 16 bytes), bits 62-63 the
// swizzle mode (1 = 128 bytes). The swizzle pattern repeats every 8 rows of 128 bytes (1024
// bytes), so a tile's base must be 1024-byte aligned; a start address inside the tile (the
// next 16 k of a K-major tile is 32 bytes further) is fine, the hardware swizzles the final
// address.
__device__ __forceinline__ std::uint64_t swizzle128_descriptor(std::uint32_t start,
                                                               std::uint32_t leading_bytes,
                                                               std::uint32_t stride_bytes) {
  return static_cast<std::uint64_t>((start & 0x3FFFF) >> 4) |
         static_cast<std::uint64_t>(leading_bytes >> 4) << 16 |
         static_cast<std::uint64_t>(stride_bytes >> 4) << 32 | 1ull << 62;
}

// Orders this thread's earlier register accesses before the wgmma that follow (needed before
// the first wgmma of a batch, since the accumulators are registers wgmma reads asynchronously).
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

// The accumulator layout of wgmma m64nNk16 (f32): warp w of the warpgroup owns rows
// 16 w .. 16 w + 15; within them each 8-column block j is laid out as one mma.sync m16n8 tile
// (common/tensor_core.cuh): with g = lane / 4 and t = lane % 4, floats 4 j + 0, 1 are row g,
// columns 8 j + 2 t, +1, and floats 4 j + 2, 3 are row g + 8, the same columns.
//
// Each wrapper below is one instruction. For N = 128, wgmma_m64n128k16_bf16 is
//
//   asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
//                "{%0, %1, ..., %63}, %64, %65, 1, 1, 1, 0, 1;\n"
//                : "+f"(d[0]), "+f"(d[1]), ..., "+f"(d[63])
//                : "l"(a_descriptor), "l"(b_descriptor));
//
// Inline PTX names every accumulator register, N / 2 of them, so the lists are spelled by the
// macros GEMM_WGMMA_REGS_R ("%0, ..., %R-1") and GEMM_WGMMA_D_R ("+f"(d[0]) ... "+f"(d[R-1])),
// 8 at a time. The trailing immediates: scale-d = 1 (D += A * B), scale-a = scale-b = 1, then
// whether A and B are transposed.
//
//   wgmma_m64nNk16_bf16 (steps 17-22): "0, 1". A is K-major (a row of the row-major A is
//     contiguous along k), B transposed, N-major (a row of the row-major B is contiguous along
//     n). D (64 x N) += A (64 x 16) * B (16 x N).
//   wgmma_transposed_m64nNk16_bf16 (step 23): "1, 0", the layouts the other way round: A
//     M-major (a column of the 64 x 16 A is contiguous) and B K-major. Step 23 computes tiles of
//     C^T with them: its A operand is a box of the row-major B, its B operand a tile of the
//     row-major A. A K-major operand can be any multiple of 8 wide, so step 23 uses every width
//     from 128 to 256 in steps of 16.
// clang-format off
#define GEMM_WGMMA_REGS_8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define GEMM_WGMMA_REGS_16 GEMM_WGMMA_REGS_8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define GEMM_WGMMA_REGS_24 GEMM_WGMMA_REGS_16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define GEMM_WGMMA_REGS_32 GEMM_WGMMA_REGS_24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define GEMM_WGMMA_REGS_40 GEMM_WGMMA_REGS_32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define GEMM_WGMMA_REGS_48 GEMM_WGMMA_REGS_40 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define GEMM_WGMMA_REGS_56 GEMM_WGMMA_REGS_48 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define GEMM_WGMMA_REGS_64 GEMM_WGMMA_REGS_56 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define GEMM_WGMMA_REGS_72 GEMM_WGMMA_REGS_64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define GEMM_WGMMA_REGS_80 GEMM_WGMMA_REGS_72 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define GEMM_WGMMA_REGS_88 GEMM_WGMMA_REGS_80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define GEMM_WGMMA_REGS_96 GEMM_WGMMA_REGS_88 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define GEMM_WGMMA_REGS_104 GEMM_WGMMA_REGS_96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define GEMM_WGMMA_REGS_112 GEMM_WGMMA_REGS_104 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define GEMM_WGMMA_REGS_120 GEMM_WGMMA_REGS_112 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define GEMM_WGMMA_REGS_128 GEMM_WGMMA_REGS_120 ", %120, %121, %122, %123, %124, %125, %126, %127"

#define GEMM_WGMMA_D8(i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
  "+f"(d[i + 6]), "+f"(d[i + 7])
#define GEMM_WGMMA_D_8 GEMM_WGMMA_D8(0)
#define GEMM_WGMMA_D_16 GEMM_WGMMA_D_8, GEMM_WGMMA_D8(8)
#define GEMM_WGMMA_D_24 GEMM_WGMMA_D_16, GEMM_WGMMA_D8(16)
#define GEMM_WGMMA_D_32 GEMM_WGMMA_D_24, GEMM_WGMMA_D8(24)
#define GEMM_WGMMA_D_40 GEMM_WGMMA_D_32, GEMM_WGMMA_D8(32)
#define GEMM_WGMMA_D_48 GEMM_WGMMA_D_40, GEMM_WGMMA_D8(40)
#define GEMM_WGMMA_D_56 GEMM_WGMMA_D_48, GEMM_WGMMA_D8(48)
#define GEMM_WGMMA_D_64 GEMM_WGMMA_D_56, GEMM_WGMMA_D8(56)
#define GEMM_WGMMA_D_72 GEMM_WGMMA_D_64, GEMM_WGMMA_D8(64)
#define GEMM_WGMMA_D_80 GEMM_WGMMA_D_72, GEMM_WGMMA_D8(72)
#define GEMM_WGMMA_D_88 GEMM_WGMMA_D_80, GEMM_WGMMA_D8(80)
#define GEMM_WGMMA_D_96 GEMM_WGMMA_D_88, GEMM_WGMMA_D8(88)
#define GEMM_WGMMA_D_104 GEMM_WGMMA_D_96, GEMM_WGMMA_D8(96)
#define GEMM_WGMMA_D_112 GEMM_WGMMA_D_104, GEMM_WGMMA_D8(104)
#define GEMM_WGMMA_D_120 GEMM_WGMMA_D_112, GEMM_WGMMA_D8(112)
#define GEMM_WGMMA_D_128 GEMM_WGMMA_D_120, GEMM_WGMMA_D8(120)

// Defines one wrapper: NAME for width N (R = N / 2 accumulators per thread; DESCRIPTORS names the
// two descriptor operands, %R and %R+1; TRANSPOSES is the last two immediates).
#define GEMM_DEFINE_WGMMA(NAME, N, R, DESCRIPTORS, TRANSPOSES)                                     \
  __device__ __forceinline__ void NAME(float (&d)[R], std::uint64_t a_descriptor,                  \
                                       std::uint64_t b_descriptor) {                               \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 "                       \
                 "{" GEMM_WGMMA_REGS_##R "}, " DESCRIPTORS ", 1, 1, 1, " TRANSPOSES ";\n"          \
                 : GEMM_WGMMA_D_##R                                                                \
                 : "l"(a_descriptor), "l"(b_descriptor));                                          \
  }

// Defines both wrappers for width N.
#define GEMM_DEFINE_WGMMA_BF16(N, R, DESCRIPTORS)                                                  \
  GEMM_DEFINE_WGMMA(wgmma_m64n##N##k16_bf16, N, R, DESCRIPTORS, "0, 1")                            \
  GEMM_DEFINE_WGMMA(wgmma_transposed_m64n##N##k16_bf16, N, R, DESCRIPTORS, "1, 0")

GEMM_DEFINE_WGMMA_BF16(128, 64, "%64, %65")
GEMM_DEFINE_WGMMA_BF16(144, 72, "%72, %73")
GEMM_DEFINE_WGMMA_BF16(160, 80, "%80, %81")
GEMM_DEFINE_WGMMA_BF16(176, 88, "%88, %89")
GEMM_DEFINE_WGMMA_BF16(192, 96, "%96, %97")
GEMM_DEFINE_WGMMA_BF16(208, 104, "%104, %105")
GEMM_DEFINE_WGMMA_BF16(224, 112, "%112, %113")
GEMM_DEFINE_WGMMA_BF16(240, 120, "%120, %121")
GEMM_DEFINE_WGMMA_BF16(256, 128, "%128, %129")
// clang-format on

}  // namespace gemm::hopper
