#include "workspace.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda_check.h"

namespace gemm {
namespace {

// One pool per device, made on first use. Its release threshold is "never": memory freed into
// it stays reserved for the next call instead of going back to the driver at the next
// synchronization, so after the first call (a warm-up, in the harness) taking a workspace
// costs no device allocation. (The default pool of a device releases at every synchronization;
// it also belongs to the whole process, so we leave its settings alone.)
cudaMemPool_t pool_for_current_device() {
  static std::mutex mutex;
  static std::vector<cudaMemPool_t> pools;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> const lock(mutex);
  if (pools.size() <= static_cast<std::size_t>(device)) pools.resize(device + 1, nullptr);
  if (pools[device] == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    check_cuda(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
    std::uint64_t keep_everything = UINT64_MAX;
    check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything),
               "cudaMemPoolSetAttribute");
    pools[device] = pool;
  }
  return pools[device];
}

}  // namespace

StreamWorkspace::StreamWorkspace(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
  check_cuda(cudaMallocFromPoolAsync(&pointer_, bytes, pool_for_current_device(), stream),
             "cudaMallocFromPoolAsync (workspace)");
}

StreamWorkspace::~StreamWorkspace() {
  // A destructor cannot throw; an error here would also show at the stream's next check.
  if (pointer_ != nullptr) cudaFreeAsync(pointer_, stream_);
}

namespace {

// One stream's lasting memory: two allocations from the device's pool, each with its size.
struct LastingBuffers {
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
  void* zeroed = nullptr;
  std::size_t zeroed_bytes = 0;
};

// Replaces `buffer` with `bytes` from the pool when it holds fewer, behind the work on `stream`.
void grow(void*& buffer, std::size_t& held, std::size_t bytes, cudaStream_t stream, bool zero) {
  if (held >= bytes) return;
  if (buffer != nullptr) check_cuda(cudaFreeAsync(buffer, stream), "cudaFreeAsync (lasting)");
  check_cuda(cudaMallocFromPoolAsync(&buffer, bytes, pool_for_current_device(), stream),
             "cudaMallocFromPoolAsync (lasting)");
  if (zero) check_cuda(cudaMemsetAsync(buffer, 0, bytes, stream), "cudaMemsetAsync (lasting)");
  held = bytes;
}

}  // namespace

LastingWorkspace lasting_workspace(cudaStream_t stream, std::size_t scratch_bytes,
                                   std::size_t zeroed_bytes) {
  static std::mutex mutex;
  static std::map<std::pair<int, unsigned long long>, LastingBuffers> streams;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  unsigned long long stream_id = 0;
  check_cuda(cudaStreamGetId(stream, &stream_id), "cudaStreamGetId");
  std::lock_guard<std::mutex> const lock(mutex);
  LastingBuffers& buffers = streams[{device, stream_id}];
  grow(buffers.scratch, buffers.scratch_bytes, scratch_bytes, stream, false);
  grow(buffers.zeroed, buffers.zeroed_bytes, zeroed_bytes, stream, true);
  return {buffers.scratch, buffers.zeroed};
}

}  // namespace gemm
