#include "harness.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <iostream>
#include <new>
#include <random>
#include <span>
#include <tuple>

#include "cli.h"
#include "cuda_check.h"
#include "device_buffer.h"
#include "gpu_reference.h"
#include "precision.h"
#include "report.h"
#include "timer.h"
#include "verify.h"

namespace gemm {
namespace {

// Guard band on each side of every matrix buffer: a write just before or after C lands here.
constexpr std::size_t kGuardElements = 1024;

// A problem that cannot run here for lack of memory: the message says what it needed.
class OutOfMemory : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

struct ProblemLayouts {
  MatrixLayout a, b, c;
};

ProblemLayouts layouts_for(Shape const& s) {
  return {{s.m, s.k, s.k, kGuardElements, kGuardElements},
          {s.k, s.n, s.n, kGuardElements, kGuardElements},
          {s.m, s.n, s.n, kGuardElements, kGuardElements}};
}

// Refuses, with a clear message, a problem whose buffers would not fit in free GPU memory,
// before anything large is allocated on the host or the device.
template <typename Precision>
void require_memory(Shape const& s, ProblemLayouts const& l) {
  double const inputs = sizeof(typename Precision::Input) *
                        (double(l.a.buffer_elements()) + double(l.b.buffer_elements()));
  double const outputs = 2.0 * sizeof(typename Precision::Output) * double(l.c.buffer_elements());
  double const reference = double(reference_gemm_gpu_bytes(s.m, s.n, s.k));
  double const needed = inputs + outputs + reference;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (needed > 0.95 * double(free_bytes)) {
    throw OutOfMemory("problem " + s.text() + " needs " + gib(needed) +
                      " of GPU memory (A, B, two copies of C and a float64 reference), but the "
                      "GPU has " +
                      gib(double(free_bytes)) + " free of " + gib(double(total_bytes)));
  }
}

struct Context {
  std::string step;
  std::string name;
  std::string gpu;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
};

template <typename Precision>
std::pair<Measurement, std::string> run_problem(Context const& ctx, Options const& options,
                                                Shape const& shape, std::uint64_t seed) {
  ProblemLayouts const l = layouts_for(shape);
  require_memory<Precision>(shape, l);

  Random random(seed);
  HostMatrix A(l.a);
  HostMatrix B(l.b);
  HostMatrix C0(l.c);
  fill_random(A, random);
  fill_random(B, random);
  fill_initial_c(C0, options.beta, random);

  using In = typename Precision::Input;
  using Out = typename Precision::Output;
  DeviceMatrix<In> dA(A);
  DeviceMatrix<In> dB(B);
  DeviceMatrix<Out> dC(C0);
  DeviceMatrix<Out> dC_cublas(C0);
  int const m = shape.m, n = shape.n, k = shape.k;
  float const alpha = options.alpha, beta = options.beta;

  Reference const reference = reference_gemm_gpu(ctx.cublas, alpha, dA.data(), l.a, dB.data(), l.b,
                                                 beta, dC.data(), l.c, Precision::unit_roundoff);

  auto run_step = [&] {
    Precision::step(m, n, k, alpha, dA.data(), l.a.ld, dB.data(), l.b.ld, beta, dC.data(), l.c.ld,
                    ctx.stream);
  };
  auto run_cublas = [&] {
    Precision::cublas(ctx.cublas, m, n, k, alpha, dA.data(), l.a.ld, dB.data(), l.b.ld, beta,
                      dC_cublas.data(), l.c.ld);
  };

  // Check first, on the first call, from the poisoned C.
  HostMatrix result(l.c);
  run_step();
  check_cuda(cudaStreamSynchronize(ctx.stream), "step kernel");
  dC.download(result);
  CheckResult const step_check = check_result(result, reference);

  run_cublas();
  check_cuda(cudaStreamSynchronize(ctx.stream), "cuBLAS");
  dC_cublas.download(result);
  CheckResult const cublas_check = check_result(result, reference);

  // Then time: warm-up, then step and cuBLAS alternately, so that clock or neighbour drift
  // during the run affects both alike. The medians make the ratio.
  EventTimer timer(ctx.stream);
  for (int i = 0; i < options.warmup; ++i) {
    run_step();
    run_cublas();
  }
  check_cuda(cudaStreamSynchronize(ctx.stream), "warm-up");
  std::vector<double> step_times, cublas_times;
  for (int i = 0; i < options.repeats; ++i) {
    step_times.push_back(timer.time_ms(run_step));
    cublas_times.push_back(timer.time_ms(run_cublas));
  }

  Measurement m_out;
  m_out.step = ctx.step;
  m_out.name = ctx.name;
  m_out.precision = Precision::name;
  m_out.shape = shape;
  m_out.alpha = alpha;
  m_out.beta = beta;
  m_out.step_ms = median_of(step_times);
  m_out.cublas_ms = median_of(cublas_times);
  m_out.check_passed = step_check.passed();
  m_out.max_error_over_bound = step_check.worst_ratio;
  m_out.relative_error = step_check.relative_error;
  m_out.cublas_check_passed = cublas_check.passed();
  m_out.gpu = ctx.gpu;
  std::string summary = step_check.summary();
  if (!cublas_check.passed()) summary += " [cuBLAS itself: " + cublas_check.summary() + "]";
  return {m_out, summary};
}

}  // namespace

std::string gpu_name(int device) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return prop.name;
}

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

template <typename Precision>
int run_harness(std::string const& step_directory, int argc, char** argv) {
  std::string const program = argc > 0 ? argv[0] : step_directory;
  auto const parsed = parse_command_line(
      std::span<char const* const>(argv + (argc > 0 ? 1 : 0), argc > 0 ? argc - 1 : 0));
  if (!parsed.options) {
    std::cerr << program << ": " << parsed.error << "\n\n" << usage(program);
    return kExitUsage;
  }
  Options const& options = *parsed.options;
  if (options.help) {
    std::cout << usage(program);
    return kExitOk;
  }

  int device_count = 0;
  cudaError_t const status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess || device_count == 0) {
    std::cerr << program << ": no usable CUDA GPU ("
              << (status != cudaSuccess ? cudaGetErrorString(status) : "no devices found")
              << "). The benchmark needs one; the build and the host tests do not.\n";
    return kExitNoGpu;
  }

  std::uint64_t const seed = options.seed ? *options.seed : std::random_device{}();
  Context ctx;
  std::tie(ctx.step, ctx.name) = split_step_name(step_directory);
  int exit_code = kExitOk;
  try {
    check_cuda(cudaSetDevice(0), "cudaSetDevice");
    ctx.gpu = gpu_name(0);
    check_cuda(cudaStreamCreate(&ctx.stream), "cudaStreamCreate");
    check_cublas(cublasCreate(&ctx.cublas), "cublasCreate");
    check_cublas(cublasSetStream(ctx.cublas, ctx.stream), "cublasSetStream");
    Precision::configure(ctx.cublas);

    // In CSV mode the description goes to stderr as comments, so stdout is pure CSV.
    std::ostream& info = options.csv ? std::cerr : std::cout;
    char const* prefix = options.csv ? "# " : "";
    info << prefix << "step " << step_directory << " (" << Precision::name << ") | alpha "
         << options.alpha << " beta " << options.beta << " | seed " << seed << " | median of "
         << options.repeats << " after " << options.warmup << " warm-up runs\n"
         << prefix << describe_gpu(0) << "\n"
         << prefix << describe_software()
         << " | reference: float64 DGEMM; baseline: " << Precision::cublas_description << "\n";
    if (options.csv) {
      std::cout << csv_header() << std::endl;
    } else {
      std::cout << human_header() << std::endl;
    }
    for (std::size_t i = 0; i < options.shapes.size(); ++i) {
      auto const [measurement, summary] =
          run_problem<Precision>(ctx, options, options.shapes[i], seed + i);
      if (options.csv) {
        std::cout << csv_row(measurement) << std::endl;
        if (!measurement.check_passed)
          std::cerr << "# " << measurement.shape.text() << ": " << summary << "\n";
      } else {
        std::cout << human_row(measurement, summary) << std::endl;
      }
      if (!measurement.check_passed) exit_code = kExitWrongResult;
    }
  } catch (OutOfMemory const& e) {
    std::cerr << program << ": " << e.what() << "\n";
    exit_code = kExitResources;
  } catch (std::bad_alloc const&) {
    std::cerr << program << ": out of host memory for this problem size\n";
    exit_code = kExitResources;
  } catch (CudaError const& e) {
    std::cerr << program << ": CUDA error: " << e.what() << "\n";
    exit_code = kExitResources;
  } catch (std::exception const& e) {
    std::cerr << program << ": " << e.what() << "\n";
    exit_code = kExitResources;
  }
  if (ctx.cublas) cublasDestroy(ctx.cublas);
  if (ctx.stream) cudaStreamDestroy(ctx.stream);
  return exit_code;
}

template int run_harness<Fp32>(std::string const&, int, char**);

}  // namespace gemm
