// Timing with CUDA events: the time between two events recorded on the stream around the work,
// measured by the GPU itself, so host clock reads stay out of it. The stream is idle when the
// first event is recorded, so host work inside the call before and between its launches (a
// workspace, a tensor map, a launch itself) counts wherever it leaves the GPU waiting, as it would
// for a caller of the GEMM (section 11 of docs/results/split_k_tail_development_h100_2026-11-24.txt
// measures such gaps with events between the launches).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "cuda_check.h"

namespace gemm {

// The median (mean of the two middle values for an even count); throws on an empty vector.
// Medians, not means: one run slowed by a neighbour on a shared GPU does not move them.
inline double median_of(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median_of: no values");
  std::sort(values.begin(), values.end());
  std::size_t const half = values.size() / 2;
  return values.size() % 2 ? values[half] : 0.5 * (values[half - 1] + values[half]);
}

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(EventTimer const&) = delete;
  EventTimer& operator=(EventTimer const&) = delete;

  // Milliseconds that `launch` (which enqueues work on the stream) took on the GPU.
  template <typename Launch>
  double time_ms(Launch&& launch) {
    check_cuda(cudaEventRecord(start_, stream_), "cudaEventRecord");
    launch();
    check_cuda(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// Runs `launch` `warmup` times untimed, then `repeats` times timed; returns the median in ms.
// Checks for a failed launch before returning.
template <typename Launch>
double median_time_ms(EventTimer& timer, Launch&& launch, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i)
    launch();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i)
    ms.push_back(timer.time_ms(launch));
  check_cuda(cudaGetLastError(), "timed launch");
  return median_of(ms);
}

}  // namespace gemm
