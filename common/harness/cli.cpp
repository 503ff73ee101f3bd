#include "cli.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <iostream>

namespace gemm {

std::string Shape::text() const {
  std::string text = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  if (ld_pad != 0) text += ":ld+" + std::to_string(ld_pad);
  return text;
}

namespace {

// A whole-string integer in [1, INT_MAX]; letters, signs, blanks or overflow are errors.
std::optional<int> parse_positive_int(std::string_view text) {
  int value = 0;
  auto const [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

std::optional<float> parse_float(std::string_view text) {
  float value = 0.0f;
  auto const [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::uint64_t> parse_seed(std::string_view text) {
  std::uint64_t value = 0;
  auto const [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<Shape> parse_shape(std::string_view text, std::string& error) {
  std::string const quoted = "size '" + std::string(text) + "'";
  std::string_view dimensions = text;
  int ld_pad = 0;
  if (std::size_t const colon = text.find(':'); colon != std::string_view::npos) {
    dimensions = text.substr(0, colon);
    std::string_view const suffix = text.substr(colon + 1);
    if (!suffix.starts_with("ld+")) {
      error = quoted + ": after ':' comes ld+P, P extra elements on the leading dimensions " +
              "(e.g. 4096:ld+8)";
      return std::nullopt;
    }
    std::string_view const padding = suffix.substr(3);
    auto const value = parse_positive_int(padding);
    if (!value || *value > kMaxLdPad) {
      error = quoted + ": the padding '" + std::string(padding) +
              "' is not a whole number between 1 and " + std::to_string(kMaxLdPad);
      return std::nullopt;
    }
    ld_pad = *value;
  }
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    std::size_t const x = dimensions.find('x', start);
    parts.push_back(dimensions.substr(start, x == std::string_view::npos ? x : x - start));
    if (x == std::string_view::npos) break;
    start = x + 1;
  }
  if (parts.size() != 1 && parts.size() != 3) {
    error = quoted + " must be N (square) or MxNxK, optionally followed by :ld+P";
    return std::nullopt;
  }
  int dims[3];
  for (std::size_t i = 0; i < parts.size(); ++i) {
    auto const value = parse_positive_int(parts[i]);
    if (!value) {
      error = quoted + ": '" + std::string(parts[i]) + "' is not a whole number between 1 and " +
              std::to_string(INT_MAX);
      return std::nullopt;
    }
    dims[i] = *value;
  }
  Shape const shape = parts.size() == 1 ? Shape{dims[0], dims[0], dims[0], ld_pad}
                                        : Shape{dims[0], dims[1], dims[2], ld_pad};
  // The leading dimensions are ints in the GEMM's signature.
  if (std::max(shape.n, shape.k) > INT_MAX - ld_pad) {
    error = quoted + ": a leading dimension of " + std::to_string(std::max(shape.n, shape.k)) +
            " + " + std::to_string(ld_pad) + " does not fit in an int";
    return std::nullopt;
  }
  return shape;
}

ParseResult parse_command_line(std::span<char const* const> args,
                               std::vector<Shape> const& default_shapes) {
  Options options;
  ParseResult result;
  auto fail = [&](std::string message) {
    result.error = std::move(message);
    return result;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view const arg = args[i];
    // The value of an option that takes one ("--alpha 2"): the next argument, consumed.
    auto option_value = [&]() -> std::optional<std::string_view> {
      if (i + 1 >= args.size()) return std::nullopt;
      return std::string_view(args[++i]);
    };
    if (arg == "-h" || arg == "--help") {
      options.help = true;
    } else if (arg == "--csv") {
      options.csv = true;
    } else if (arg == "--alpha" || arg == "--beta") {
      auto const text = option_value();
      if (!text) return fail(std::string(arg) + " needs a value");
      auto const value = parse_float(*text);
      if (!value)
        return fail(std::string(arg) + " '" + std::string(*text) + "' is not a finite number");
      (arg == "--alpha" ? options.alpha : options.beta) = *value;
    } else if (arg == "--repeats" || arg == "--warmup") {
      auto const text = option_value();
      if (!text) return fail(std::string(arg) + " needs a value");
      auto const value = parse_positive_int(*text);
      if (!value || *value > 100000) {
        return fail(std::string(arg) + " '" + std::string(*text) +
                    "' must be a whole number from 1 to 100000");
      }
      (arg == "--repeats" ? options.repeats : options.warmup) = *value;
    } else if (arg == "--seed") {
      auto const text = option_value();
      if (!text) return fail("--seed needs a value");
      auto const value = parse_seed(*text);
      if (!value)
        return fail("--seed '" + std::string(*text) + "' must be a non-negative whole number");
      options.seed = *value;
    } else if (arg.size() > 1 && arg[0] == '-' &&
               !std::isdigit(static_cast<unsigned char>(arg[1]))) {
      return fail("unknown option '" + std::string(arg) + "'");
    } else {
      std::string error;
      auto const shape = parse_shape(arg, error);
      if (!shape) return fail(error);
      options.shapes.push_back(*shape);
    }
  }
  if (options.shapes.empty()) options.shapes = default_shapes;
  result.options = options;
  return result;
}

std::string usage(std::string_view program) {
  std::string const p(program);
  return "usage: " + p +
         " [options] [SIZE ...]\n"
         "\n"
         "Checks this step's GEMM (C = alpha*A*B + beta*C, row-major; FP32 for steps 01-13\n"
         "and 28, BF16 in and out with FP32 accumulation for steps 14-27, 32-37 and 41-43,\n"
         "scaled FP8 in and BF16 out for steps 29-31, 38-40 and 44) against a float64 reference,\n"
         "times it and cuBLAS (SGEMM, BF16 GEMM or cuBLASLt's FP8 matmul) in the same run.\n"
         "\n"
         "  SIZE            N for an N x N x N problem, or MxNxK (e.g. 1000x3000x2000);\n"
         "                  either may end in :ld+P (1 <= P <= 65536) for P extra elements at\n"
         "                  the end of every row of A, B and C (lda = k + P, ldb = ldc = n + P;\n"
         "                  e.g. 4096:ld+8); several sizes may be given; default 4096\n"
         "  --alpha X       alpha (default 1)\n"
         "  --beta X        beta (default 0; with 0, C is poisoned with NaN before the run)\n"
         "  --warmup N      untimed runs before timing (default 5)\n"
         "  --repeats N     timed runs; the median is reported (default 21)\n"
         "  --seed S        seed for the random inputs (default: a fresh one, printed)\n"
         "  --csv           machine-readable output: a CSV header and one row per size\n"
         "  -h, --help      this text\n"
         "\n"
         "exit status: 0 all checks passed, 1 a result was wrong, 2 bad command line,\n"
         "             3 no CUDA GPU, 4 out of memory or another CUDA failure\n"
         "example: " +
         p + " 4096 4097 1000x3000x2000:ld+8 --beta 0.5\n";
}

std::optional<int> simple_command_line(int argc, char** argv, std::string_view usage_text,
                                       std::initializer_list<std::string_view> flags) {
  for (int i = 1; i < argc; ++i) {
    std::string_view const arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << usage_text;
      return kExitOk;
    }
    bool known = false;
    for (auto const flag : flags)
      known = known || arg == flag;
    if (!known) {
      std::cerr << argv[0] << ": unknown argument '" << arg << "'\n\n" << usage_text;
      return kExitUsage;
    }
  }
  return std::nullopt;
}

}  // namespace gemm
