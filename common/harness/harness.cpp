#include "harness.h"
#include "gpu_info.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <new>
#include <optional>
#include <random>
#include <span>
#include <tuple>
#include <vector>

#include "cli.h"
#include "cuda_check.h"
#include "device_buffer.h"
#include "gpu_reference.h"
#include "precision.h"
#include "report.h"
#include "sweep.h"
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

// The ld_pad padding columns of every row are guard band too: a kernel that writes them fails
// the check, and one that uses them as elements of A or B multiplies NaN and fails it as well.
// B is k x n, or n x k where the precision gives it transposed (FP8).
template <typename Precision>
ProblemLayouts layouts_for(Shape const& s) {
  MatrixLayout const b =
      Precision::b_transposed
          ? MatrixLayout{s.n, s.k, s.k + s.ld_pad, kGuardElements, kGuardElements}
          : MatrixLayout{s.k, s.n, s.n + s.ld_pad, kGuardElements, kGuardElements};
  return {{s.m, s.k, s.k + s.ld_pad, kGuardElements, kGuardElements},
          b,
          {s.m, s.n, s.n + s.ld_pad, kGuardElements, kGuardElements}};
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

std::string gpu_name(int device) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return prop.name;
}

// What every problem of one run shares: the names, the stream, the cuBLAS handle.
struct Context {
  std::string step;
  std::string name;
  std::string gpu;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
};

// One problem on the GPU: random A and B, the initial C (NaN poison when beta == 0), the
// float64 reference, and two output buffers, one for the code under test and one for cuBLAS.
// Every matrix sits in a buffer with guard bands (kGuardElements before and after it).
template <typename Precision>
class Problem {
 public:
  using In = typename Precision::Input;
  using Out = typename Precision::Output;
  // The signature of a step's entry point, for the code under test.
  using Gemm = std::function<void(int, int, int, float, In const*, int, In const*, int, float, Out*,
                                  int, cudaStream_t)>;

  Problem(Context const& ctx, Options const& options, Shape const& shape, std::uint64_t seed)
      : ctx_(ctx),
        shape_(shape),
        alpha_(options.alpha),
        beta_(options.beta),
        layouts_(layouts_for<Precision>(shape)),
        initial_c_(filled_initial_c(layouts_.c, options.beta, seed)),
        a_(filled_random(layouts_.a, seed, 0)),
        b_(filled_random(layouts_.b, seed, 1)),
        c_(initial_c_),
        c_cublas_(initial_c_),
        reference_(reference_gemm_gpu(ctx.cublas, alpha_ * Precision::scale, a_.data(), layouts_.a,
                                      b_.data(), layouts_.b, beta_, c_.data(), layouts_.c,
                                      Precision::error, Precision::b_transposed)) {}

  void run(Gemm const& gemm) {
    gemm(shape_.m, shape_.n, shape_.k, alpha_, a_.data(), layouts_.a.ld, b_.data(), layouts_.b.ld,
         beta_, c_.data(), layouts_.c.ld, ctx_.stream);
  }
  // Returns false where the baseline offers nothing at this shape (cuBLASLt's FP8 needs k and
  // the leading dimensions multiples of 16).
  bool run_cublas() {
    return Precision::cublas(ctx_.cublas, shape_.m, shape_.n, shape_.k, alpha_, a_.data(),
                             layouts_.a.ld, b_.data(), layouts_.b.ld, beta_, c_cublas_.data(),
                             layouts_.c.ld);
  }

  // Restores the initial C (poison included), runs once, and compares every element with the
  // reference and every guard element with its sentinel.
  CheckResult check(Gemm const& gemm) {
    c_.upload(initial_c_);
    run(gemm);
    check_cuda(cudaStreamSynchronize(ctx_.stream), "the GEMM under test");
    return downloaded_and_checked(c_);
  }
  // Empty where the baseline offers nothing at this shape.
  std::optional<CheckResult> check_cublas() {
    c_cublas_.upload(initial_c_);
    bool const ran = run_cublas();
    check_cuda(cudaStreamSynchronize(ctx_.stream), "cuBLAS");
    if (!ran) return std::nullopt;
    return downloaded_and_checked(c_cublas_);
  }

  // Median times of `gemm` and of cuBLAS: warm-up, then the two alternately, so that clock or
  // neighbour drift during the run affects both alike. The medians make the ratio. Without a
  // baseline at this shape (with_cublas false) its time is NaN.
  std::pair<double, double> time_against_cublas(Gemm const& gemm, int warmup, int repeats,
                                                bool with_cublas = true) {
    EventTimer timer(ctx_.stream);
    for (int i = 0; i < warmup; ++i) {
      run(gemm);
      if (with_cublas) run_cublas();
    }
    check_cuda(cudaStreamSynchronize(ctx_.stream), "warm-up");
    std::vector<double> times, cublas_times;
    for (int i = 0; i < repeats; ++i) {
      times.push_back(timer.time_ms([&] { run(gemm); }));
      if (with_cublas) cublas_times.push_back(timer.time_ms([&] { run_cublas(); }));
    }
    check_cuda(cudaGetLastError(), "timed runs");
    double const cublas_ms =
        with_cublas ? median_of(cublas_times) : std::numeric_limits<double>::quiet_NaN();
    return {median_of(times), cublas_ms};
  }

 private:
  // Each matrix has its own stream of random numbers, derived from the problem's seed.
  static HostMatrix filled_initial_c(MatrixLayout const& c_layout, float beta, std::uint64_t seed) {
    HostMatrix c(c_layout);
    Random random(seed ^ 0xc0ffee);
    fill_initial_c(c, beta, random, Precision::output_element);
    return c;
  }
  static HostMatrix filled_random(MatrixLayout const& layout, std::uint64_t seed, int which) {
    HostMatrix matrix(layout);
    Random random(seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(which + 1));
    fill_random(matrix, random, Precision::element);
    return matrix;
  }
  CheckResult downloaded_and_checked(DeviceMatrix<Out> const& c) {
    HostMatrix result(layouts_.c);
    c.download(result);
    return check_result(result, reference_);
  }

  Context const& ctx_;
  Shape shape_;
  float alpha_;
  float beta_;
  ProblemLayouts layouts_;
  HostMatrix initial_c_;
  DeviceMatrix<In> a_;
  DeviceMatrix<In> b_;
  DeviceMatrix<Out> c_;
  DeviceMatrix<Out> c_cublas_;
  Reference reference_;
};

template <typename Precision>
std::pair<Measurement, std::string> run_problem(Context const& ctx, Options const& options,
                                                Shape const& shape, std::uint64_t seed,
                                                typename Problem<Precision>::Gemm const& step) {
  require_memory<Precision>(shape, layouts_for<Precision>(shape));
  Problem<Precision> problem(ctx, options, shape, seed);

  // Check first, on the very first call of the step, from the initial (poisoned) C.
  CheckResult const step_check = problem.check(step);
  std::optional<CheckResult> const cublas_check = problem.check_cublas();
  auto const [step_ms, cublas_ms] =
      problem.time_against_cublas(step, options.warmup, options.repeats, cublas_check.has_value());

  Measurement m;
  m.step = ctx.step;
  m.name = ctx.name;
  m.precision = Precision::name;
  m.shape = shape;
  m.alpha = options.alpha;
  m.beta = options.beta;
  m.step_ms = step_ms;
  m.cublas_ms = cublas_ms;
  m.check_passed = step_check.passed();
  m.max_error_over_bound = step_check.worst_ratio;
  m.relative_error = step_check.relative_error;
  m.cublas_ran = cublas_check.has_value();
  m.cublas_check_passed = cublas_check && cublas_check->passed();
  m.gpu = ctx.gpu;
  std::string summary = step_check.summary();
  if (!cublas_check) {
    summary += " [the baseline offers nothing at this shape]";
  } else if (!cublas_check->passed()) {
    summary += " [cuBLAS itself: " + cublas_check->summary() + "]";
  }
  return {m, summary};
}

// Creates the stream and the cuBLAS handle of a run, and destroys them.
template <typename Precision>
class Session {
 public:
  explicit Session(Context& ctx) : ctx_(ctx) {
    check_cuda(cudaSetDevice(0), "cudaSetDevice");
    ctx.gpu = gpu_name(0);
    check_cuda(cudaStreamCreate(&ctx.stream), "cudaStreamCreate");
    check_cublas(cublasCreate(&ctx.cublas), "cublasCreate");
    check_cublas(cublasSetStream(ctx.cublas, ctx.stream), "cublasSetStream");
    Precision::configure(ctx.cublas);
  }
  ~Session() {
    if (ctx_.cublas) cublasDestroy(ctx_.cublas);
    if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
  }
  Session(Session const&) = delete;
  Session& operator=(Session const&) = delete;

 private:
  Context& ctx_;
};

// The exit code for an exception that ended a run, after saying what happened.
int report_failure(std::string const& program) {
  try {
    throw;
  } catch (OutOfMemory const& e) {
    std::cerr << program << ": " << e.what() << "\n";
  } catch (std::bad_alloc const&) {
    std::cerr << program << ": out of host memory for this problem size\n";
  } catch (CudaError const& e) {
    std::cerr << program << ": CUDA error: " << e.what() << "\n";
    if (std::string const advice = advice_for(e.status()); !advice.empty())
      std::cerr << program << ": " << advice << "\n";
  } catch (std::exception const& e) {
    std::cerr << program << ": " << e.what() << "\n";
  }
  return kExitResources;
}

}  // namespace

template <typename Precision>
int run_harness(std::string const& step_directory, int argc, char** argv,
                StepFunction<Precision> step) {
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
  if (auto const missing = why_no_gpu()) {
    std::cerr << program << ": " << *missing
              << ". The benchmark needs a GPU; the build and the host tests do not.\n";
    return kExitNoGpu;
  }

  std::uint64_t const seed = options.seed ? *options.seed : std::random_device{}();
  Context ctx;
  std::tie(ctx.step, ctx.name) = split_step_name(step_directory);
  int exit_code = kExitOk;
  try {
    Session<Precision> const session(ctx);
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
    // The step with the arguments the harness adds for its precision (FP8's scales).
    using In = typename Precision::Input;
    using Out = typename Precision::Output;
    typename Problem<Precision>::Gemm const gemm =
        [step](int m, int n, int k, float alpha, In const* A, int lda, In const* B, int ldb,
               float beta, Out* C, int ldc, cudaStream_t stream) {
          Precision::call(step, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
        };
    for (std::size_t i = 0; i < options.shapes.size(); ++i) {
      auto const [measurement, summary] =
          run_problem<Precision>(ctx, options, options.shapes[i], seed + i, gemm);
      if (options.csv) {
        std::cout << csv_row(measurement) << std::endl;
        if (!measurement.check_passed)
          std::cerr << "# " << measurement.shape.text() << ": " << summary << "\n";
      } else {
        std::cout << human_row(measurement, summary) << std::endl;
      }
      if (!measurement.check_passed) exit_code = kExitWrongResult;
    }
  } catch (...) {
    exit_code = report_failure(program);
  }
  return exit_code;
}

template <typename Precision>
int run_sweep(std::string const& title, int argc, char** argv,
              std::vector<SweepCandidate<Precision>> const& candidates,
              std::vector<Shape> const& default_shapes) {
  std::string const program = argc > 0 ? argv[0] : title;
  std::string usage_text = "usage: ";
  usage_text += program;
  usage_text += " [--warmup N] [--repeats N] [--seed S] [--alpha X] [--beta X] [SIZE ...]\n\n";
  usage_text += title;
  usage_text +=
      ": checks every candidate against the float64 reference and\ntimes it against cuBLAS in "
      "the same process (alternating runs, medians); prints one line\nper candidate and size, "
      "then the three fastest correct candidates per size.\n\n  SIZE  N or MxNxK, optionally "
      "with :ld+P (P extra elements per row); default:";
  for (auto const& s : default_shapes) {
    usage_text += ' ';
    usage_text += s.text();
  }
  usage_text += "\n";
  auto const parsed = parse_command_line(
      std::span<char const* const>(argv + (argc > 0 ? 1 : 0), argc > 0 ? argc - 1 : 0),
      default_shapes);
  if (!parsed.options || parsed.options->csv) {
    std::cerr << program << ": " << (parsed.options ? "--csv is not supported" : parsed.error)
              << "\n\n"
              << usage_text;
    return kExitUsage;
  }
  Options options = *parsed.options;
  if (options.help) {
    std::cout << usage_text
              << "exit status: 0 every candidate correct, 1 one was "
                 "wrong, 2 bad command line, 3 no GPU, 4 CUDA failure\n";
    return kExitOk;
  }
  if (auto const missing = why_no_gpu()) {
    std::cerr << program << ": " << *missing << "\n";
    return kExitNoGpu;
  }
  std::uint64_t const seed = options.seed ? *options.seed : std::random_device{}();
  Context ctx;
  ctx.step = title;
  bool all_passed = true;
  try {
    Session<Precision> const session(ctx);
    std::cout << title << " | alpha " << options.alpha << " beta " << options.beta << " | seed "
              << seed << " | medians of " << options.repeats << " after " << options.warmup
              << " warm-up runs\n"
              << describe_gpu(0) << "\n"
              << describe_software() << "\n";
    for (std::size_t i = 0; i < options.shapes.size(); ++i) {
      Shape const& shape = options.shapes[i];
      require_memory<Precision>(shape, layouts_for<Precision>(shape));
      Problem<Precision> problem(ctx, options, shape, seed + i);
      std::optional<CheckResult> const cublas_check = problem.check_cublas();
      std::cout << "\n"
                << shape.text() << "  (cuBLAS check: "
                << (cublas_check ? cublas_check->summary() : std::string("not offered")) << ")\n";
      std::vector<std::pair<double, std::string>> ranked;
      for (auto const& candidate : candidates) {
        CheckResult const check = problem.check(candidate.gemm);
        auto const [ms, cublas_ms] =
            problem.time_against_cublas(candidate.gemm, options.warmup, options.repeats);
        char line[512];
        std::snprintf(line, sizeof line, "%-60s %9.3f ms %9.1f GFLOPS %6.1f%% of cuBLAS (%.1f)  %s",
                      candidate.name.c_str(), ms, shape.flops() / (ms * 1e6),
                      100.0 * cublas_ms / ms, shape.flops() / (cublas_ms * 1e6),
                      check.passed() ? "pass" : "FAIL");
        std::cout << "  " << line << std::endl;
        if (check.passed()) {
          ranked.emplace_back(ms, line);
        } else {
          all_passed = false;
          std::cout << "    " << check.summary() << "\n";
        }
      }
      std::sort(ranked.begin(), ranked.end());
      for (std::size_t r = 0; r < std::min<std::size_t>(3, ranked.size()); ++r)
        std::cout << "BEST " << shape.text() << "  " << ranked[r].second << "\n";
    }
  } catch (...) {
    return report_failure(program);
  }
  return all_passed ? kExitOk : kExitWrongResult;
}

template int run_harness<Fp32>(std::string const&, int, char**, StepFunction<Fp32>);
template int run_sweep<Fp32>(std::string const&, int, char**,
                             std::vector<SweepCandidate<Fp32>> const&, std::vector<Shape> const&);
template int run_harness<Bf16>(std::string const&, int, char**, StepFunction<Bf16>);
template int run_harness<Fp32Split>(std::string const&, int, char**, StepFunction<Fp32Split>);
template int run_harness<Fp8>(std::string const&, int, char**, StepFunction<Fp8>);
template int run_harness<Fp8Promoted>(std::string const&, int, char**, StepFunction<Fp8Promoted>);
template int run_sweep<Bf16>(std::string const&, int, char**,
                             std::vector<SweepCandidate<Bf16>> const&, std::vector<Shape> const&);

}  // namespace gemm
