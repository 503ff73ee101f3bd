// Not a lesson: the debug build's guard against silent hangs (docs/09_hopper_primer.md,
// "Debugging a hang"). Configured with `meson setup build-debug -Ddebug_hangs=true`, every
// mbarrier wait gives up after kHangTries tries: one thread prints which block, thread, barrier
// and parity it was waiting for, and traps, so the launch fails with an error instead of hanging.
// The normal build compiles the check out (kDebugHangs is false): its waits are unchanged.
#pragma once

#include <cstdio>

namespace gemm {

#ifdef GEMM_DEBUG_HANGS
inline constexpr bool kDebugHangs = true;
#else
inline constexpr bool kDebugHangs = false;
#endif

// Each try of mbarrier.try_wait suspends the thread for a while before it reports "not yet", so
// this many tries take seconds, far longer than any wait of a correct kernel.
inline constexpr unsigned kHangTries = 1u << 20;

// Set by the first thread that gives up: it prints the one message and traps.
static __device__ unsigned hang_reported = 0;

static __device__ __noinline__ void report_hang(unsigned barrier, unsigned parity) {
  // The others go on waiting until the trap ends the launch: one that trapped now could end it
  // before the message is out.
  if (atomicExch(&hang_reported, 1u) != 0) return;
  std::printf(
      "gemm: an mbarrier wait did not complete after %u tries: block (%d, %d, %d), thread %d, "
      "barrier at shared address 0x%x, waiting for the phase of parity %u\n",
      kHangTries, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
      static_cast<int>(blockIdx.z), static_cast<int>(threadIdx.x), barrier, parity);
  __trap();
}

}  // namespace gemm
