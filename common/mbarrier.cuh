// Taught in step 18 (steps/18_tma_wgmma/), which writes these wrappers inline.
//
// An mbarrier is a 64-bit object in shared memory that counts arrivals *and* bytes: a thread
// announces how many bytes a copy will bring (expect_tx), the copy engine counts them off as they
// land, and the barrier's phase completes when both counts reach zero; then the next phase
// begins. Waiting means "until the phase of this parity has completed" (0 for the first phase,
// 1 for the second, 0 again ...). docs/09_hopper_primer.md draws the state machine.
#pragma once

#include <cstdint>

#include "hang_check.cuh"

namespace gemm::hopper {

// `arrivals` threads must arrive (besides the bytes announced) before a phase completes.
__device__ __forceinline__ void mbarrier_init(std::uint32_t barrier, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals));
}

// Makes initialized barriers visible to the other threads, to the copy engine and to the other
// blocks of a cluster; a __syncthreads() (or a cluster sync) must follow before anyone uses them.
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

// Waits until the phase of parity `parity` has completed. In the debug build (hang_check.cuh) a
// wait that never completes reports itself and traps.
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

}  // namespace gemm::hopper
