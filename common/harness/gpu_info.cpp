#include "gpu_info.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>

#include "cuda_check.h"

namespace gemm {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

std::string describe_gpu(int device) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int sm_clock_khz = 0, memory_clock_khz = 0;
  check_cuda(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, device), "clock rate");
  check_cuda(cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, device),
             "memory clock rate");
  char line[512];
  std::snprintf(line, sizeof line,
                "GPU %d: %s | %d SMs | compute capability %d.%d | peak SM clock %d MHz | memory "
                "clock %d MHz, %d-bit bus | %s | L2 %d MiB",
                device, prop.name, prop.multiProcessorCount, prop.major, prop.minor,
                sm_clock_khz / 1000, memory_clock_khz / 1000, prop.memoryBusWidth,
                gib(double(prop.totalGlobalMem)).c_str(), prop.l2CacheSize >> 20);
  return line;
}

std::string describe_software() {
  int runtime = 0, driver = 0, cublas_version = 0;
  check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check_cublas(cublasGetProperty(MAJOR_VERSION, &cublas_version), "cublasGetProperty");
  int minor = 0, patch = 0;
  check_cublas(cublasGetProperty(MINOR_VERSION, &minor), "cublasGetProperty");
  check_cublas(cublasGetProperty(PATCH_LEVEL, &patch), "cublasGetProperty");
  char line[256];
  std::snprintf(line, sizeof line, "CUDA runtime %d.%d | driver %d.%d | cuBLAS %d.%d.%d",
                runtime / 1000, runtime % 1000 / 10, driver / 1000, driver % 1000 / 10,
                cublas_version, minor, patch);
  return line;
}

std::optional<std::string> why_no_gpu() {
  int device_count = 0;
  cudaError_t const status = cudaGetDeviceCount(&device_count);
  if (status == cudaSuccess && device_count > 0) return std::nullopt;
  if (status == cudaSuccess || status == cudaErrorNoDevice) {
    return "no NVIDIA GPU found (the driver is installed but reports no device)";
  }
  if (status == cudaErrorInsufficientDriver) {
    // The runtime says this both when there is no driver at all and when it is too old.
    if (void* const driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(driver);
      int driver_version = 0, runtime_version = 0;
      cudaDriverGetVersion(&driver_version);
      cudaRuntimeGetVersion(&runtime_version);
      return "the NVIDIA driver supports CUDA " + std::to_string(driver_version / 1000) + "." +
             std::to_string(driver_version % 1000 / 10) + " but this build needs CUDA " +
             std::to_string(runtime_version / 1000) + "." +
             std::to_string(runtime_version % 1000 / 10) + ": update the driver";
    }
    return "no NVIDIA driver or GPU found (libcuda.so.1 is not installed)";
  }
  return std::string("CUDA cannot use a GPU here: ") + cudaGetErrorString(status);
}

std::optional<std::string> why_not_sm90a() {
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  if (properties.major == 9 && properties.minor == 0) return std::nullopt;
  return "this step uses Hopper-only instructions (TMA, wgmma; sm_90a) and GPU 0 is " +
         std::string(properties.name) + " (compute capability " + std::to_string(properties.major) +
         "." + std::to_string(properties.minor) + "): skipped. It runs on an H100, H200 or GH200.";
}

bool skipped_for_not_sm90a(char const* step) {
  if (why_no_gpu()) return false;
  auto const why = why_not_sm90a();
  if (!why) return false;
  std::fprintf(stderr, "%s: %s\n", step, why->c_str());
  return true;
}

std::optional<int> exit_code_without_gpu(char const* program) {
  auto const missing = why_no_gpu();
  if (!missing) return std::nullopt;
  std::fprintf(stderr, "%s: %s\n", program, missing->c_str());
  return 3;
}

std::string advice_for(cudaError_t status) {
  if (status != cudaErrorNoKernelImageForDevice && status != cudaErrorInvalidPtx &&
      status != cudaErrorUnsupportedPtxVersion && status != cudaErrorInvalidKernelImage) {
    return "";
  }
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  std::string const arch = std::to_string(major) + std::to_string(minor);
  return "This build has no code that runs on this GPU (compute capability " +
         std::to_string(major) + "." + std::to_string(minor) +
         "). Rebuild for it: meson configure build -Dgpu_arch=" + arch +
         " && meson compile -C build. A step that needs a newer GPU than this one (Hopper's "
         "sm_90a instructions, say) cannot run here at all; its README says which it needs.";
}

}  // namespace gemm
