// Taught in step 19 (steps/19_warp_specialized/), which writes the setmaxnreg wrappers, the
// register check and PipelineState inline.
//
// A warp-specialized block has warpgroups with fixed roles: a producer that issues TMA copies
// and consumers that run wgmma, handing stages back and forth through full and empty mbarriers.
// Compiles only for sm_90a.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "async_copy.cuh"  // shared_address

namespace gemm::hopper {

// --- register budgets ---------------------------------------------------------------------------

// setmaxnreg: a warpgroup gives registers back to its block's pool (dec) or takes more from it
// (inc), so that warpgroups with different roles can have different budgets. Every warp of the
// warpgroup executes it; the count is a multiple of 8 in [24, 256]. The pool belongs to the block
// and holds what the block was given at launch: its threads times the registers per thread that
// ptxas allocated. setmaxnreg.inc waits until the pool has enough, so budgets that add up to more
// than the launch allocation wait forever.
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// The registers per thread that __launch_bounds__(threads, 1) lets ptxas allocate: the SM's
// 65,536 split evenly, rounded down to the allocation unit of 8 (168 for 384 threads).
constexpr int launch_registers_per_thread(int threads) {
  return 65536 / threads / 8 * 8;
}

// Whether a producer warpgroup with `producer` registers per thread and `consumers` consumer
// warpgroups with `consumer` each fit the pool a block of `threads` threads is given at launch.
constexpr bool register_budgets_fit(int threads, int producer, int consumer, int consumers) {
  return 128 * (producer + consumers * consumer) <= threads * launch_registers_per_thread(threads);
}

// The same check against the kernel as compiled (the registers ptxas really allocated), once per
// kernel, before its first launch: throws instead of launching a kernel that would hang.
template <auto kKernel>
void check_register_budgets(int threads, int producer, int consumer, int consumers) {
  static int const allocated = [] {
    cudaFuncAttributes attributes{};
    cudaError_t const status = cudaFuncGetAttributes(&attributes, kKernel);
    if (status != cudaSuccess) {
      throw std::runtime_error(std::string("cudaFuncGetAttributes: ") + cudaGetErrorString(status));
    }
    return attributes.numRegs;
  }();
  int const budget = 128 * (producer + consumers * consumer);
  if (budget > threads * allocated) {
    throw std::runtime_error("bf16_gemm: the setmaxnreg budgets add up to " +
                             std::to_string(budget) + " registers, more than the " +
                             std::to_string(threads * allocated) + " the block has (" +
                             std::to_string(threads) + " threads x " + std::to_string(allocated) +
                             "): setmaxnreg.inc would wait forever");
  }
}

// --- shared storage -----------------------------------------------------------------------------

// The block's dynamic shared memory as a `Storage` whose first byte is 1024-byte aligned, as
// 128-byte-swizzled tiles must be (dynamic shared memory is only guaranteed 16 bytes). Launch
// with shared_storage_bytes<Storage>() bytes, which include the slack for the alignment.
template <class Storage>
__device__ __forceinline__ Storage& shared_storage(unsigned char* dynamic_shared) {
  std::uint32_t const address = gemm::shared_address(dynamic_shared);
  return *reinterpret_cast<Storage*>(dynamic_shared + (1024 - address % 1024) % 1024);
}
template <class Storage>
constexpr int shared_storage_bytes() {
  return static_cast<int>(sizeof(Storage)) + 1024;
}

// --- the ring of stages ------------------------------------------------------------------------

// Where a walk around the ring of kStages stages is: the stage, and the parity of the phase its
// barriers are in on this pass (0 on the first pass, 1 on the second, ...). A consumer waits on
// full[stage] for `phase`; a producer waits on empty[stage] for `phase ^ 1`, which returns at once
// on the first pass, since the phase "before" a barrier's first one counts as completed.
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

}  // namespace gemm::hopper
