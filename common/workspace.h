// Scratch memory for one GEMM call (split-K partial sums, and later steps' workspaces), taken
// from a stream-ordered memory pool: allocation and release are enqueued on the call's stream
// like kernels, so a call never synchronizes the device, and its cost shows in its timing.
//
//   gemm::StreamWorkspace partials(bytes, stream);   // cudaMallocFromPoolAsync
//   kernel<<<..., stream>>>(partials.get<float>());
//   // leaving the scope enqueues cudaFreeAsync: the memory goes back to the pool once the
//   // work queued before it on `stream` is done, ready for the next call without a new
//   // device allocation.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace gemm {

class StreamWorkspace {
 public:
  StreamWorkspace(std::size_t bytes, cudaStream_t stream);
  ~StreamWorkspace();
  StreamWorkspace(StreamWorkspace const&) = delete;
  StreamWorkspace& operator=(StreamWorkspace const&) = delete;

  template <typename T>
  T* get() const {
    return static_cast<T*>(pointer_);
  }

 private:
  void* pointer_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace gemm
