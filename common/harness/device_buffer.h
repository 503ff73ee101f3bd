// Owning device allocations, and a HostMatrix's whole buffer (guard bands included) on the GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_check.h"
#include "verify.h"

namespace gemm {

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    check_cuda(cudaMalloc(&data_, count * sizeof(T)), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  DeviceBuffer(DeviceBuffer const&) = delete;
  DeviceBuffer& operator=(DeviceBuffer const&) = delete;

  T* get() const { return data_; }
  std::size_t size() const { return count_; }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// The device copy of a HostMatrix, stored as element type T: float for the FP32 steps,
// __nv_bfloat16 for the BF16 steps, __nv_fp8_e4m3 for the FP8 steps' A and B. The host side always
// holds floats, and every value the harness generates is exactly a value of T (fill_random rounds
// to it), so the conversion is exact in both directions, guard and poison NaNs included; upload
// throws if it would not be.
template <typename T>
class DeviceMatrix {
 public:
  explicit DeviceMatrix(HostMatrix const& host)
      : layout_(host.layout), buffer_(host.layout.buffer_elements()) {
    upload(host);
  }

  // Element (0, 0): the pointer a GEMM call receives.
  T* data() const { return buffer_.get() + layout_.front; }
  MatrixLayout const& layout() const { return layout_; }

  // Returns when the data is on the device. (A cudaMemcpy from pageable memory may return
  // before its DMA lands; a kernel on a non-blocking stream would then read stale memory.)
  void upload(HostMatrix const& host) {
    if constexpr (std::is_same_v<T, float>) {
      check_cuda(cudaMemcpy(buffer_.get(), host.data.data(), bytes(), cudaMemcpyHostToDevice),
                 "cudaMemcpy (upload)");
    } else if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) {
      // The FP8 format has one NaN per sign and no infinity: guard and poison NaNs upload as NaN.
      std::vector<__nv_fp8_e4m3> converted(host.data.size());
      for (std::size_t i = 0; i < converted.size(); ++i) {
        converted[i] = __nv_fp8_e4m3(host.data[i]);
        float const back = static_cast<float>(converted[i]);
        if (back != host.data[i] && !(std::isnan(back) && std::isnan(host.data[i]))) {
          throw std::invalid_argument(
              "DeviceMatrix: a value is not an e4m3 value (round_to first)");
        }
      }
      check_cuda(cudaMemcpy(buffer_.get(), converted.data(), bytes(), cudaMemcpyHostToDevice),
                 "cudaMemcpy (upload)");
    } else {
      static_assert(std::is_same_v<T, __nv_bfloat16>, "DeviceMatrix holds float, bf16 or fp8");
      std::vector<std::uint16_t> converted(host.data.size());
      for (std::size_t i = 0; i < converted.size(); ++i)
        converted[i] = bf16_bits(host.data[i]);
      check_cuda(cudaMemcpy(buffer_.get(), converted.data(), bytes(), cudaMemcpyHostToDevice),
                 "cudaMemcpy (upload)");
    }
    check_cuda(cudaDeviceSynchronize(), "upload");
  }

  void download(HostMatrix& host) const {
    static_assert(!std::is_same_v<T, __nv_fp8_e4m3>, "FP8 matrices are inputs: never downloaded");
    if constexpr (std::is_same_v<T, float>) {
      check_cuda(cudaMemcpy(host.data.data(), buffer_.get(), bytes(), cudaMemcpyDeviceToHost),
                 "cudaMemcpy (download)");
    } else {
      std::vector<std::uint16_t> converted(host.data.size());
      check_cuda(cudaMemcpy(converted.data(), buffer_.get(), bytes(), cudaMemcpyDeviceToHost),
                 "cudaMemcpy (download)");
      for (std::size_t i = 0; i < converted.size(); ++i)
        host.data[i] = from_bf16_bits(converted[i]);
    }
  }

 private:
  std::size_t bytes() const { return buffer_.size() * sizeof(T); }

  MatrixLayout layout_;
  DeviceBuffer<T> buffer_;
};

}  // namespace gemm
