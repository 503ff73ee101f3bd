// The tuning sweep behind step 11: times tile configurations, K splits and block-group sizes
// of tuned.cu's kernel on the GPU present, each checked against the float64 reference, and
// cuBLAS in the same process. Usage (meson builds it as build/sweep_11_tuned):
//   build/sweep_11_tuned [SIZE ...]        default: 4096 8192 4097 1000x3000x2000
// It prints one line per variant and, per size, the best one. README.md records a run.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cli.h"
#include "device_buffer.h"
#include "gpu_reference.h"
#include "precision.h"
#include "report.h"
#include "timer.h"
#include "tuned.cu"

namespace {

using Launcher = std::function<void(tuned::LaunchPlan const&, int, int, int, float, float const*,
                                    int, float const*, int, float, float*, int, cudaStream_t)>;

struct Candidate {
  std::string name;
  Launcher launch;
};

template <class Cfg>
Candidate candidate(std::string name) {
  return {std::move(name) + " (" + std::to_string(Cfg::kThreads) + " thr, " +
              std::to_string(Cfg::kTM) + "x" + std::to_string(Cfg::kTN) + "/thr, " +
              std::to_string(Cfg::kSharedBytes / 1024) + " KB)",
          tuned::launch<Cfg>};
}

// The variants the sweep covers: block tile, k depth, warp tile, lane grid, stages.
std::vector<Candidate> candidates() {
  using namespace tuned;
  return {
      candidate<TileConfig<128, 128, 16, 32, 64, 4, 3, 2>>("128x128x16 w32x64 l4x8 s3"),
      candidate<TileConfig<128, 128, 16, 32, 64, 4, 4, 2>>("128x128x16 w32x64 l4x8 s4"),
      candidate<TileConfig<128, 128, 32, 32, 64, 4, 3, 2>>("128x128x32 w32x64 l4x8 s3"),
      candidate<TileConfig<128, 128, 32, 32, 64, 4, 2, 2>>("128x128x32 w32x64 l4x8 s2"),
      candidate<TileConfig<128, 128, 16, 64, 32, 8, 3, 2>>("128x128x16 w64x32 l8x4 s3"),
      candidate<TileConfig<128, 64, 16, 32, 64, 4, 4, 4>>("128x64x16 w32x64 l4x8 s4"),
      candidate<TileConfig<64, 128, 16, 32, 64, 4, 4, 4>>("64x128x16 w32x64 l4x8 s4"),
      candidate<TileConfig<128, 256, 16, 64, 64, 4, 3, 1>>("128x256x16 w64x64 l4x8 s3"),
  };
}

constexpr int kWarmup = 2;
constexpr int kRepeats = 7;

}  // namespace

int main(int argc, char** argv) {
  std::vector<gemm::Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    std::string error;
    auto const shape = gemm::parse_shape(argv[i], error);
    if (!shape) {
      std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
      return gemm::kExitUsage;
    }
    shapes.push_back(*shape);
  }
  if (shapes.empty())
    shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {4097, 4097, 4097}, {1000, 3000, 2000}};
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "%s: no CUDA GPU\n", argv[0]);
    return gemm::kExitNoGpu;
  }

  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  gemm::check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  gemm::check_cublas(cublasCreate(&cublas), "cublasCreate");
  gemm::check_cublas(cublasSetStream(cublas, stream), "cublasSetStream");
  gemm::Fp32::configure(cublas);
  gemm::EventTimer timer(stream);
  int const sms = tuned::sm_count();
  auto const all = candidates();
  bool all_passed = true;

  for (auto const& s : shapes) {
    gemm::Random random(1234);
    gemm::MatrixLayout const la{s.m, s.k, s.k, 0, 64}, lb{s.k, s.n, s.n, 0, 64},
        lc{s.m, s.n, s.n, 0, 64};
    gemm::HostMatrix A(la), B(lb), C0(lc);
    gemm::fill_random(A, random);
    gemm::fill_random(B, random);
    gemm::fill_initial_c(C0, 0.0f, random);  // beta = 0: poison
    gemm::DeviceMatrix<float> dA(A), dB(B), dC(C0);
    auto const reference = gemm::reference_gemm_gpu(cublas, 1.0f, dA.data(), la, dB.data(), lb,
                                                    0.0f, dC.data(), lc, gemm::kFloatUnitRoundoff);
    auto median_ms = [&](auto&& run) {
      return gemm::median_time_ms(timer, run, kWarmup, kRepeats);
    };
    double const cublas_ms = median_ms([&] {
      gemm::Fp32::cublas(cublas, s.m, s.n, s.k, 1.0f, dA.data(), s.k, dB.data(), s.n, 0.0f,
                         dC.data(), s.n);
    });
    double const tflop = s.flops() / 1e12;
    std::printf("\n%s  cuBLAS %.3f ms = %.1f TFLOP/s  (%d SMs)\n", s.text().c_str(), cublas_ms,
                tflop / (cublas_ms * 1e-3), sms);

    struct Row {
      std::string what;
      double ms;
    };
    std::vector<Row> rows;
    for (auto const& c : all) {
      for (int splits : {1, 2, 3, 4}) {
        if (splits > 1 && s.k / splits < 256) continue;
        for (int group_m : {8, 16}) {
          if (splits > 1 && group_m != 8) continue;
          tuned::LaunchPlan const plan{splits, group_m};
          auto run = [&] {
            c.launch(plan, s.m, s.n, s.k, 1.0f, dA.data(), s.k, dB.data(), s.n, 0.0f, dC.data(),
                     s.n, stream);
          };
          dC.upload(C0);  // poison again: every variant must write every element
          run();
          gemm::check_cuda(cudaStreamSynchronize(stream), "variant");
          gemm::HostMatrix result(lc);
          dC.download(result);
          auto const check = gemm::check_result(result, reference);
          double const ms = median_ms(run);
          char what[256];
          std::snprintf(what, sizeof what, "%-62s split %d group %2d", c.name.c_str(), splits,
                        group_m);
          std::printf("  %s  %8.3f ms %6.1f TFLOP/s %6.1f%% of cuBLAS  %s\n", what, ms,
                      tflop / (ms * 1e-3), 100.0 * cublas_ms / ms,
                      check.passed() ? "pass" : "FAIL");
          all_passed = all_passed && check.passed();
          if (check.passed()) rows.push_back({what, ms});
        }
      }
    }
    std::sort(rows.begin(), rows.end(), [](Row const& a, Row const& b) { return a.ms < b.ms; });
    for (std::size_t i = 0; i < std::min<std::size_t>(3, rows.size()); ++i) {
      std::printf("BEST %s %s  %.1f%% of cuBLAS\n", s.text().c_str(), rows[i].what.c_str(),
                  100.0 * cublas_ms / rows[i].ms);
    }
  }
  cublasDestroy(cublas);
  cudaStreamDestroy(stream);
  return all_passed ? gemm::kExitOk : gemm::kExitWrongResult;
}
