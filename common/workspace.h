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

// Memory kept for a stream from one call to the next (taught in step 36): `scratch` holds
// scratch_bytes of anything, `zeroed` holds zeroed_bytes that are zero when a call starts, as long
// as every kernel that uses them leaves them zero. Taking it again on the same stream costs no
// allocation and no memset; only a call that needs more than the stream holds grows it (stream-
// ordered: the old memory is freed behind the work already queued, the new zeroed on the stream).
// One per stream, told apart by cudaStreamGetId, kept until the process ends. Calls on one stream
// run one after another, so they can share it; calls on different streams never do. The runtime
// refuses cudaStreamGetId on a stream being captured into a CUDA graph, so such a call throws.
struct LastingWorkspace {
  void* scratch;
  void* zeroed;
};
LastingWorkspace lasting_workspace(cudaStream_t stream, std::size_t scratch_bytes,
                                   std::size_t zeroed_bytes);

}  // namespace gemm
