// A development probe behind step 48's notebook (not built by meson): step 48's translation unit
// with every entry of kShapes callable by index, timed in sustained phases. Per shape and per
// candidate (cuBLAS, step 48's own call, and the kShapes indices listed in CP_ONLY), a phase of
// CP_SECONDS seconds (default 2) of back-to-back calls after 10 untimed ones: the time per call
// (CUDA events around the phase), the board's energy per call (NVML's total-energy counter, read
// after a sync at each end), and, from a thread that reads NVML every 5 ms during the phase, the
// mean SM clock, the median board power, the GPU temperature at the end and the share of readings
// with the software power cap among the clock's event reasons. Time x mean clock gives the SM
// cycles per call: a kernel's cycles, apart from the clock the power cap leaves it. CP_ROUNDS
// rounds (default 2), the order reversed every round. From the repository root:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Icommon -Icommon/harness
//       docs/results/notebooks/power_cap_48.cu common/gemm_arguments.cpp common/workspace.cpp
//       common/tensor_map.cpp -lcublas -lcuda -ldl -o power_cap_48
//   CP_ONLY=9,38,45 ./power_cap_48 8192 4096x14336x4096
#include <cublas_v2.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../../../steps/48_tiles_in_turn/tiles_in_turn.cu"

namespace nvml {
using InitFn = int (*)();
using HandleFn = int (*)(unsigned, void**);
using ClockFn = int (*)(void*, int, unsigned*);
using PowerFn = int (*)(void*, unsigned*);
using EnergyFn = int (*)(void*, unsigned long long*);
using ReasonsFn = int (*)(void*, unsigned long long*);
using TemperatureFn = int (*)(void*, int, unsigned*);
void* device = nullptr;
ClockFn clock_info = nullptr;
PowerFn power_usage = nullptr;
EnergyFn total_energy = nullptr;
ReasonsFn event_reasons = nullptr;
TemperatureFn temperature = nullptr;
constexpr unsigned long long kSwPowerCap = 0x4;  // nvmlClocksEventReasonSwPowerCap
bool load() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (lib == nullptr) return false;
  reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"))();
  reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))(0, &device);
  clock_info = reinterpret_cast<ClockFn>(dlsym(lib, "nvmlDeviceGetClockInfo"));
  power_usage = reinterpret_cast<PowerFn>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
  total_energy = reinterpret_cast<EnergyFn>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
  event_reasons = reinterpret_cast<ReasonsFn>(dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
  if (event_reasons == nullptr) {
    event_reasons =
        reinterpret_cast<ReasonsFn>(dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
  }
  temperature = reinterpret_cast<TemperatureFn>(dlsym(lib, "nvmlDeviceGetTemperature"));
  return clock_info && power_usage && total_energy && event_reasons && temperature;
}
}  // namespace nvml

// NVML read every 5 ms on its own thread while a phase runs.
struct Sampler {
  std::atomic<bool> running{false};
  std::thread thread;
  std::vector<unsigned> clocks;
  std::vector<unsigned> milliwatts;
  int readings = 0;
  int power_capped = 0;
  void start() {
    clocks.clear();
    milliwatts.clear();
    readings = power_capped = 0;
    running = true;
    thread = std::thread([this] {
      while (running) {
        unsigned mhz = 0, mw = 0;
        unsigned long long reasons = 0;
        nvml::clock_info(nvml::device, 1 /* NVML_CLOCK_SM */, &mhz);
        nvml::power_usage(nvml::device, &mw);
        nvml::event_reasons(nvml::device, &reasons);
        clocks.push_back(mhz);
        milliwatts.push_back(mw);
        ++readings;
        if (reasons & nvml::kSwPowerCap) ++power_capped;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  void stop() {
    running = false;
    thread.join();
  }
};

static char const* pairing_name(Pairing p) {
  return p == Pairing::kStacked ? "S" : p == Pairing::kSideBySide ? "X" : "T";
}

int main(int argc, char** argv) {
  if (!nvml::load()) {
    std::printf("NVML not found\n");
    return 1;
  }
  double const seconds = std::getenv("CP_SECONDS") ? std::atof(std::getenv("CP_SECONDS")) : 2.0;
  int const rounds = std::getenv("CP_ROUNDS") ? std::atoi(std::getenv("CP_ROUNDS")) : 2;
  std::vector<int> only;
  if (char const* list = std::getenv("CP_ONLY")) {
    for (char const* p = list; *p;) {
      only.push_back(std::atoi(p));
      while (*p && *p != ',')
        ++p;
      if (*p) ++p;
    }
  }
  cublasHandle_t handle;
  cublasCreate(&handle);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  Sampler sampler;
  for (int a = 1; a < argc; ++a) {
    int m, n, k;
    if (std::sscanf(argv[a], "%dx%dx%d", &m, &n, &k) != 3) m = n = k = std::atoi(argv[a]);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<bf16> ha((size_t)m * k), hb((size_t)k * n);
    for (auto& x : ha)
      x = __float2bfloat16(u(rng));
    for (auto& x : hb)
      x = __float2bfloat16(u(rng));
    bf16 *A, *B, *C;
    cudaMalloc(&A, ha.size() * 2);
    cudaMalloc(&B, hb.size() * 2);
    cudaMalloc(&C, (size_t)m * n * 2);
    cudaMemcpy(A, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(B, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice);
    float const alpha = 1.f, beta = 0.f;
    auto call = [&](int which) {
      if (which == -1) {
        cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, CUDA_R_16BF, n, A,
                     CUDA_R_16BF, k, &beta, C, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
      } else if (which == -2) {
        gemm::bf16_gemm(m, n, k, alpha, A, k, B, n, beta, C, n, 0);
      } else {
        gemm_with_tile<kShapes, RelaxedClusterSync, ZeroingHandOver, PromotionByPitch,
                       UniformDescriptors, TmaLoadsOfC>(kShapes[which], m, n, k, alpha, A, k, B, n,
                                                        beta, C, n, 0);
      }
    };
    std::vector<int> order = {-1, -2};
    order.insert(order.end(), only.begin(), only.end());
    double const flop = 2.0 * m * n * k;
    int const calls = std::max(20, static_cast<int>(seconds * 7.0e14 / flop));
    std::printf("== %s: %d calls a phase\n", argv[a], calls);
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t j = 0; j < order.size(); ++j) {
        int const which = order[round % 2 ? order.size() - 1 - j : j];
        for (int i = 0; i < 10; ++i)
          call(which);
        cudaDeviceSynchronize();
        unsigned long long energy0 = 0, energy1 = 0;
        nvml::total_energy(nvml::device, &energy0);
        sampler.start();
        cudaEventRecord(e0);
        for (int i = 0; i < calls; ++i)
          call(which);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        sampler.stop();
        nvml::total_energy(nvml::device, &energy1);
        unsigned celsius = 0;
        nvml::temperature(nvml::device, 0 /* NVML_TEMPERATURE_GPU */, &celsius);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        double const us = 1000.0 * ms / calls;
        double mean_mhz = 0;
        for (unsigned c : sampler.clocks)
          mean_mhz += c;
        mean_mhz /= std::max<std::size_t>(1, sampler.clocks.size());
        std::vector<unsigned> mw = sampler.milliwatts;
        std::sort(mw.begin(), mw.end());
        double const watts = mw.empty() ? 0 : mw[mw.size() / 2] / 1000.0;
        double const mj = double(energy1 - energy0) / calls;
        char name[64];
        if (which == -1) {
          std::snprintf(name, sizeof name, "cuBLAS");
        } else if (which == -2) {
          std::snprintf(name, sizeof name, "step 48's call");
        } else {
          TileShape const s = kShapes[which];
          std::snprintf(name, sizeof name, "[%2d] %3d x %d %s %s", which, s.height, s.consumers,
                        pairing_name(s.pairing),
                        s.work == ConsumerWork::kTilesInTurn ? "turn" : "coop");
        }
        std::printf(
            "  round %d  %-24s %8.1f us  %6.1f TFLOP/s  clock %6.1f MHz  %7.3f M "
            "cycles  power %5.0f W  %7.2f mJ  %5.3f TFLOP/J  capped %3.0f%%  %u C  %s\n",
            round + 1, name, us, flop / us / 1e6, mean_mhz, us * mean_mhz / 1e6, watts, mj,
            flop / (mj * 1e-3) / 1e12, 100.0 * sampler.power_capped / std::max(1, sampler.readings),
            celsius, cudaGetErrorString(cudaGetLastError()));
        std::fflush(stdout);
      }
    }
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
  }
  cublasDestroy(handle);
  return 0;
}
