#include "workspace.h"

#include <cstdint>
#include <mutex>
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

}  // namespace gemm
