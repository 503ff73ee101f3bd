// Demo for step 28 (split operands): how accurate and how fast an FP32 GEMM on BF16 tensor cores
// is when each FP32 operand is split into three bf16 parts and the six largest of the nine partial
// products are summed (bf16x6), beside the FP32 routes cuBLAS offers.
//
//   build/split_accuracy_28_split_operands [accuracy|speed|all] [--mn N] [--k K1,K2,...]
//   (built for each split-operand step: build/split_accuracy_NN_name; the default mode is all)
//
// accuracy: C = A B with M = N = 256 (--mn) and K = 256, 1024, 4096, 16384, 65536 (--k), on two
// inputs: "uniform", values uniform in [-1, 1), and "wide", sign * m * 2^e with m uniform in
// [1, 2) and e a uniform integer in [-20, 20]. The error of an element is
// |c - ref| / sum_p |a_ip| |b_pj|, with ref and the sum computed by cublasDgemm on the inputs
// converted to double: the error relative to the size of the terms, which is what the rounding of
// a dot product scales with, so a sum that cancels does not look worse than it is. The tables give
// the largest and the median error over the M x N elements of
//   cuBLAS SGEMM   cublasSgemm with CUBLAS_DEFAULT_MATH: FP32 on the CUDA cores;
//   cuBLAS TF32    cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32: one TF32 tensor-core product;
//   cuBLAS BF16x9  cublasGemmEx, CUBLAS_COMPUTE_32F_EMULATED_16BFX9 with the eager emulation
//                  strategy: all nine bf16 products, where cuBLAS offers it. The notes say when it
//                  is not offered, or when its C is bitwise SGEMM's (cuBLAS fell back);
//   this step      gemm::sgemm of steps/28_split_operands (bf16x6).
// speed: TFLOP/s of the step, SGEMM, TF32 and BF16x9 at five shapes, uniform inputs, tight leading
// dimensions, alpha 1, beta 0; the median of 11 calls after 3 warm-up calls, timed with CUDA
// events on one stream.
//
// Progress goes to stderr. stdout has the Markdown tables, which the step's lesson
// (steps/28_split_operands/README.md) quotes, and lines to parse: csv,dataset,k,method,max,median
// and csv,speed,shape,method,ms,tflops (a method cuBLAS does not offer has no csv line).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "cuda_check.h"
#include "device_buffer.h"
#include "gemm.h"
#include "gpu_info.h"
#include "gpu_reference.h"
#include "timer.h"

namespace {

using gemm::check_cublas;
using gemm::check_cuda;
using gemm::DeviceBuffer;

enum class Inputs { kUniform, kWide };
constexpr std::array<Inputs, 2> kAllInputs = {Inputs::kUniform, Inputs::kWide};
char const* name_of(Inputs inputs) {
  return inputs == Inputs::kUniform ? "uniform" : "wide";
}

// In the order of the accuracy table's columns; kMethodNames are the csv names.
enum Method { kSgemm, kTf32, kBf16x9, kStep, kMethodCount };
constexpr std::array<char const*, kMethodCount> kMethodNames = {"sgemm", "tf32", "bf16x9", "step"};

constexpr std::uint64_t kSeed = 28;

__device__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i depends only on (seed, i), so the data do not depend on the launch configuration.
__global__ void fill_kernel(float* data, std::size_t count, std::uint64_t seed, Inputs inputs) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    std::uint64_t const bits = splitmix64(seed ^ splitmix64(i));
    if (inputs == Inputs::kUniform) {
      // 24 random bits b: b / 2^23 - 1 is exact in FP32 and lies in [-1, 1).
      data[i] = static_cast<float>(bits >> 40) * 0x1p-23f - 1.0f;
    } else {
      // Built from its fields: a random sign, the exponent e + 127, 23 random mantissa bits.
      unsigned const sign = static_cast<unsigned>(bits & 1u);
      unsigned const mantissa = static_cast<unsigned>((bits >> 1) & 0x7fffffu);
      int const exponent = static_cast<int>((bits >> 24) % 41) - 20;
      data[i] =
          __uint_as_float(sign << 31 | static_cast<unsigned>(exponent + 127) << 23 | mantissa);
    }
  }
}

// The stream every call runs on, and a cuBLAS handle bound to it.
class Gpu {
 public:
  Gpu() {
    check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    check_cublas(cublasSetStream(handle_, stream_), "cublasSetStream");
    // Pure FP32 for cublasSgemm: this mode does not let it use TF32 tensor cores.
    check_cublas(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  ~Gpu() {
    cublasDestroy(handle_);
    cudaStreamDestroy(stream_);
  }
  Gpu(Gpu const&) = delete;
  Gpu& operator=(Gpu const&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t handle() const { return handle_; }

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
};

DeviceBuffer<float> random_matrix(Gpu& gpu, std::size_t count, std::uint64_t seed, Inputs inputs) {
  DeviceBuffer<float> matrix(count);
  fill_kernel<<<1024, 256, 0, gpu.stream()>>>(matrix.get(), count, seed, inputs);
  check_cuda(cudaGetLastError(), "fill_kernel");
  return matrix;
}

template <typename T>
std::vector<T> download(Gpu& gpu, DeviceBuffer<T> const& buffer) {
  std::vector<T> host(buffer.size());
  check_cuda(cudaMemcpyAsync(host.data(), buffer.get(), buffer.size() * sizeof(T),
                             cudaMemcpyDeviceToHost, gpu.stream()),
             "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(gpu.stream()), "cudaStreamSynchronize");
  return host;
}

// Row-major C = A B (A m x k, B k x n, tight rows) is column-major C^T = B^T A^T: cuBLAS gets the
// operands swapped and n before m. A refusal comes back as the status, an error of the step throws.
cublasStatus_t multiply(Gpu& gpu, Method method, int m, int n, int k, float const* A,
                        float const* B, float* C) {
  float const one = 1.0f;
  float const zero = 0.0f;
  cublasHandle_t const handle = gpu.handle();
  if (method == kSgemm) {
    return cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n, A, k, &zero, C, n);
  }
  if (method == kTf32) {
    return cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, CUDA_R_32F, n, A,
                        CUDA_R_32F, k, &zero, C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32,
                        CUBLAS_GEMM_DEFAULT);
  }
  if (method == kBf16x9) {
#if CUBLAS_VERSION >= 120900  // the emulated compute type and the strategy came in cuBLAS 12.9
    // Eager: emulate wherever cuBLAS can, not only where its heuristics expect a speed-up, so a
    // C that is SGEMM's means cuBLAS cannot emulate on this GPU at all.
    cublasEmulationStrategy_t previous = CUBLAS_EMULATION_STRATEGY_DEFAULT;
    check_cublas(cublasGetEmulationStrategy(handle, &previous), "cublasGetEmulationStrategy");
    check_cublas(cublasSetEmulationStrategy(handle, CUBLAS_EMULATION_STRATEGY_EAGER),
                 "cublasSetEmulationStrategy");
    cublasStatus_t const status = cublasGemmEx(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, CUDA_R_32F, n, A, CUDA_R_32F, k, &zero,
        C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_EMULATED_16BFX9, CUBLAS_GEMM_DEFAULT);
    check_cublas(cublasSetEmulationStrategy(handle, previous), "cublasSetEmulationStrategy");
    return status;
#else
    return CUBLAS_STATUS_NOT_SUPPORTED;
#endif
  }
  gemm::sgemm(m, n, k, one, A, k, B, n, zero, C, n, gpu.stream());
  return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// accuracy

struct ErrorStats {
  double max = 0.0;
  double median = 0.0;
};

struct AccuracyRow {
  int k = 0;
  std::array<std::optional<ErrorStats>, kMethodCount> stats;  // empty: cuBLAS refused the method
};

// What the BF16x9 calls showed over all cases: a refusal, or how often C was SGEMM's bit for bit.
struct Bf16x9Findings {
  std::optional<cublasStatus_t> refusal;
  int compared = 0;
  int identical_to_sgemm = 0;
};

// The value and the magnitude sum_p |a_ip| |b_pj| in float64 (the harness's reference, dense
// matrices): every product of two floats is exact in double, and the sums' rounding (about
// K * 2^-53) is far below the errors measured.
using Reference = gemm::ReferenceSums;

Reference reference_product(Gpu& gpu, int m, int n, int k, DeviceBuffer<float> const& A,
                            DeviceBuffer<float> const& B) {
  gemm::MatrixLayout const a{m, k, k, 0, 0};
  gemm::MatrixLayout const b{k, n, n, 0, 0};
  gemm::MatrixLayout const c{m, n, n, 0, 0};
  return gemm::reference_sums_gpu(gpu.handle(), 1.0, A.get(), a, B.get(), b, 0.0f,
                                  static_cast<float const*>(nullptr), c);
}

// A NaN error (a method that left C unwritten, or overflowed) counts as infinite, so the largest
// error shows it instead of comparisons with NaN hiding it.
ErrorStats relative_errors(std::vector<float> const& c, Reference const& reference) {
  std::vector<double> errors(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) {
    double const error = std::abs(static_cast<double>(c[i]) - reference.value[i]);
    double const magnitude = reference.magnitude[i];
    double const relative = magnitude > 0.0 ? error / magnitude : (error == 0.0 ? 0.0 : INFINITY);
    errors[i] = std::isnan(relative) ? INFINITY : relative;
  }
  ErrorStats stats;
  stats.max = *std::max_element(errors.begin(), errors.end());
  auto const middle = errors.begin() + errors.size() / 2;
  std::nth_element(errors.begin(), middle, errors.end());
  stats.median = *middle;
  return stats;
}

AccuracyRow measure_accuracy(Gpu& gpu, Inputs inputs, int mn, int k, Bf16x9Findings& findings) {
  std::uint64_t const seed = kSeed + 1000003ull * k + 2 * static_cast<std::uint64_t>(inputs);
  DeviceBuffer<float> const A = random_matrix(gpu, std::size_t(mn) * k, seed, inputs);
  DeviceBuffer<float> const B = random_matrix(gpu, std::size_t(k) * mn, seed + 1, inputs);
  Reference const reference = reference_product(gpu, mn, mn, k, A, B);
  DeviceBuffer<float> C(std::size_t(mn) * mn);
  AccuracyRow row;
  row.k = k;
  std::vector<float> sgemm_c;
  for (int method = 0; method < kMethodCount; ++method) {
    // NaN in C first (all bits set): a method that reports success without writing C shows as an
    // infinite error, not as the previous method's result.
    check_cuda(cudaMemsetAsync(C.get(), 0xff, C.size() * sizeof(float), gpu.stream()),
               "cudaMemsetAsync");
    cublasStatus_t const status =
        multiply(gpu, Method(method), mn, mn, k, A.get(), B.get(), C.get());
    if (method == kBf16x9 && status != CUBLAS_STATUS_SUCCESS) {
      if (!findings.refusal) findings.refusal = status;
      continue;
    }
    check_cublas(status, kMethodNames[method]);
    std::vector<float> const c = download(gpu, C);
    row.stats[method] = relative_errors(c, reference);
    if (method == kSgemm) sgemm_c = c;
    if (method == kBf16x9) {
      ++findings.compared;
      if (std::memcmp(c.data(), sgemm_c.data(), c.size() * sizeof(float)) == 0) {
        ++findings.identical_to_sgemm;
      }
    }
  }
  return row;
}

void print_accuracy_table(Inputs inputs, std::vector<AccuracyRow> const& rows) {
  std::printf("\n%s inputs: |c - ref| / sum_p |a_ip| |b_pj|, largest and median over C\n\n",
              name_of(inputs));
  std::printf(
      "| K | SGEMM max | SGEMM median | TF32 max | TF32 median | BF16x9 max | BF16x9 median | "
      "step max | step median | step max / SGEMM max |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (AccuracyRow const& row : rows) {
    std::printf("| %d ", row.k);
    for (auto const& stats : row.stats) {
      if (stats) {
        std::printf("| %.2e | %.2e ", stats->max, stats->median);
      } else {
        std::printf("| n/a | n/a ");
      }
    }
    std::printf("| %.2f |\n", row.stats[kStep]->max / row.stats[kSgemm]->max);
  }
}

void print_bf16x9_notes(Bf16x9Findings const& findings) {
  std::printf("\n");
  if (findings.refusal) {
    std::printf("cuBLAS BF16x9: not offered on this GPU (status %s)\n",
                cublasGetStatusString(*findings.refusal));
  }
  if (findings.compared == 0) return;
  if (findings.identical_to_sgemm == findings.compared) {
    std::printf(
        "cuBLAS BF16x9: bitwise identical to cuBLAS SGEMM: cuBLAS falls back to SGEMM "
        "here (all %d cases)\n",
        findings.compared);
  } else {
    std::printf(
        "cuBLAS BF16x9: differs from cuBLAS SGEMM in %d of %d cases: it computes C its "
        "own way here\n",
        findings.compared - findings.identical_to_sgemm, findings.compared);
  }
}

void run_accuracy(Gpu& gpu, int mn, std::vector<int> const& ks) {
  std::array<std::vector<AccuracyRow>, kAllInputs.size()> rows;
  Bf16x9Findings findings;
  for (std::size_t set = 0; set < kAllInputs.size(); ++set) {
    for (int k : ks) {
      std::fprintf(stderr, "accuracy: %s inputs, %d x %d x %d\n", name_of(kAllInputs[set]), mn, mn,
                   k);
      rows[set].push_back(measure_accuracy(gpu, kAllInputs[set], mn, k, findings));
    }
    print_accuracy_table(kAllInputs[set], rows[set]);
  }
  print_bf16x9_notes(findings);
  std::printf("\ncsv,dataset,k,method,max,median\n");
  for (std::size_t set = 0; set < kAllInputs.size(); ++set) {
    for (AccuracyRow const& row : rows[set]) {
      for (int method = 0; method < kMethodCount; ++method) {
        if (!row.stats[method]) continue;
        std::printf("csv,%s,%d,%s,%.6e,%.6e\n", name_of(kAllInputs[set]), row.k,
                    kMethodNames[method], row.stats[method]->max, row.stats[method]->median);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// speed

struct Shape {
  int m, n, k;
};
constexpr Shape kSpeedShapes[] = {{4096, 4096, 4096},
                                  {8192, 8192, 8192},
                                  {4097, 4097, 4097},
                                  {1000, 3000, 2000},
                                  {2048, 2048, 2048}};

void run_speed(Gpu& gpu) {
  std::printf(
      "\nTFLOP/s (2 M N K / time), median of 11 calls after 3 warm-up calls\n\n"
      "| M x N x K | step TFLOP/s | SGEMM TFLOP/s | TF32 TFLOP/s | BF16x9 TFLOP/s | step / SGEMM "
      "| step / TF32 |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n");
  gemm::EventTimer timer(gpu.stream());
  std::vector<std::string> csv_lines;
  for (Shape const& s : kSpeedShapes) {
    std::fprintf(stderr, "speed: %d x %d x %d\n", s.m, s.n, s.k);
    DeviceBuffer<float> const A =
        random_matrix(gpu, std::size_t(s.m) * s.k, kSeed, Inputs::kUniform);
    DeviceBuffer<float> const B =
        random_matrix(gpu, std::size_t(s.k) * s.n, kSeed + 1, Inputs::kUniform);
    DeviceBuffer<float> C(std::size_t(s.m) * s.n);
    auto const time_ms = [&](Method method) {
      return gemm::median_time_ms(
          timer,
          [&] {
            check_cublas(multiply(gpu, method, s.m, s.n, s.k, A.get(), B.get(), C.get()),
                         kMethodNames[method]);
          },
          3, 11);
    };
    std::array<std::optional<double>, kMethodCount> ms;
    ms[kStep] = time_ms(kStep);
    ms[kSgemm] = time_ms(kSgemm);
    ms[kTf32] = time_ms(kTf32);
    // One untimed call first: for BF16x9 a refusal is a result, not an error.
    if (multiply(gpu, kBf16x9, s.m, s.n, s.k, A.get(), B.get(), C.get()) == CUBLAS_STATUS_SUCCESS) {
      ms[kBf16x9] = time_ms(kBf16x9);
    }
    double const flops = 2.0 * s.m * s.n * s.k;
    auto const tflops = [&](int method) { return flops / *ms[method] / 1e9; };
    char bf16x9[32] = "n/a";
    if (ms[kBf16x9]) std::snprintf(bf16x9, sizeof bf16x9, "%.1f", tflops(kBf16x9));
    std::printf("| %d x %d x %d | %.1f | %.1f | %.1f | %s | %.2fx | %.2fx |\n", s.m, s.n, s.k,
                tflops(kStep), tflops(kSgemm), tflops(kTf32), bf16x9, *ms[kSgemm] / *ms[kStep],
                *ms[kTf32] / *ms[kStep]);
    for (int method : {kStep, kSgemm, kTf32, kBf16x9}) {
      if (!ms[method]) continue;
      char line[128];
      std::snprintf(line, sizeof line, "csv,speed,%dx%dx%d,%s,%.4f,%.2f", s.m, s.n, s.k,
                    kMethodNames[method], *ms[method], tflops(method));
      csv_lines.push_back(line);
    }
  }
  std::printf("\ncsv,speed,shape,method,ms,tflops\n");
  for (std::string const& line : csv_lines)
    std::printf("%s\n", line.c_str());
}

// ---------------------------------------------------------------------------------------------
// command line

char const kUsage[] =
    "usage: split_accuracy [accuracy|speed|all] [--mn N] [--k K1,K2,...]\n"
    "  accuracy  errors of cuBLAS SGEMM, TF32, BF16x9 and this step against float64\n"
    "  speed     TFLOP/s of the same methods at five shapes\n"
    "  all       both (the default)\n"
    "  --mn N    M = N of the accuracy runs (default 256)\n"
    "  --k LIST  K of the accuracy runs (default 256,1024,4096,16384,65536)\n";

struct Options {
  bool accuracy = true;
  bool speed = true;
  int mn = 256;
  std::vector<int> ks = {256, 1024, 4096, 16384, 65536};
};

std::optional<int> parse_positive(std::string const& text) {
  char* end = nullptr;
  long const value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 1 || value > INT_MAX) return std::nullopt;
  return static_cast<int>(value);
}

std::optional<Options> parse_command_line(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string const argument = argv[i];
    if (argument == "accuracy" || argument == "speed" || argument == "all") {
      options.accuracy = argument != "speed";
      options.speed = argument != "accuracy";
    } else if (argument == "--mn" && i + 1 < argc) {
      auto const mn = parse_positive(argv[++i]);
      if (!mn) return std::nullopt;
      options.mn = *mn;
    } else if (argument == "--k" && i + 1 < argc) {
      std::string const list = argv[++i];
      options.ks.clear();
      for (std::size_t start = 0; start <= list.size();) {
        std::size_t const comma = std::min(list.find(',', start), list.size());
        auto const k = parse_positive(list.substr(start, comma - start));
        if (!k) return std::nullopt;
        options.ks.push_back(*k);
        start = comma + 1;
      }
    } else {
      return std::nullopt;
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  auto const options = parse_command_line(argc, argv);
  if (!options) {
    std::fprintf(stderr, "%s", kUsage);
    return gemm::kExitUsage;
  }
  if (auto const missing = gemm::why_no_gpu()) {
    std::fprintf(stderr, "split_accuracy: %s: skipped\n", missing->c_str());
    return gemm::kExitSkipped;
  }
  // The step is built for sm_90a only (wgmma), and so is this program.
  if (auto const why = gemm::why_not_sm90a()) {
    std::fprintf(stderr, "split_accuracy: %s\n", why->c_str());
    return gemm::kExitSkipped;
  }
  try {
    std::printf("%s\n%s\n", gemm::describe_gpu(0).c_str(), gemm::describe_software().c_str());
    Gpu gpu;
    if (options->accuracy) run_accuracy(gpu, options->mn, options->ks);
    if (options->speed) run_speed(gpu);
  } catch (gemm::CudaError const& error) {
    std::fprintf(stderr, "split_accuracy: %s\n%s\n", error.what(),
                 gemm::advice_for(error.status()).c_str());
    return gemm::kExitResources;
  } catch (std::exception const& error) {
    std::fprintf(stderr, "split_accuracy: %s\n", error.what());
    return gemm::kExitResources;
  }
  return gemm::kExitOk;
}
