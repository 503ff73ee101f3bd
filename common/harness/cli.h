// Command line of the per-step benchmark executables.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gemm {

// Exit codes of every step executable (and of the GPU test suite where they apply).
inline constexpr int kExitOk = 0;
inline constexpr int kExitWrongResult = 1;  // a check failed: C differs from the reference
inline constexpr int kExitUsage = 2;        // bad command line
inline constexpr int kExitNoGpu = 3;        // no usable CUDA GPU
inline constexpr int kExitResources = 4;    // problem does not fit in memory, or CUDA failed
inline constexpr int kExitSkipped = 77;     // test suites: "skipped" for meson (no GPU)

// The largest padding a size may ask for (":ld+P"): far more than any alignment needs.
inline constexpr int kMaxLdPad = 65536;

struct Shape {
  int m = 0;
  int n = 0;
  int k = 0;
  // Extra elements after every row, as in a matrix cut out of a wider one: lda = k + ld_pad,
  // ldb = ldc = n + ld_pad. It takes the rows off the alignment a power-of-two length gives.
  int ld_pad = 0;
  std::string text() const;  // "4096x4096x4096", or "4096x4096x4096:ld+8" with ld_pad 8
  double flops() const { return 2.0 * m * n * k; }
  bool operator==(Shape const&) const = default;
};

struct Options {
  std::vector<Shape> shapes;  // default: parse_command_line's default_shapes
  float alpha = 1.0f;
  float beta = 0.0f;
  int warmup = 5;
  int repeats = 21;
  bool csv = false;
  std::optional<std::uint64_t> seed;  // default: a fresh seed per run, printed
  bool help = false;
};

struct ParseResult {
  std::optional<Options> options;  // set on success
  std::string error;               // set on failure: what was wrong, in one line
};

// Parses the arguments after the program name. Never throws, never exits. Without a SIZE
// argument, the shapes are `default_shapes`.
ParseResult parse_command_line(std::span<char const* const> args,
                               std::vector<Shape> const& default_shapes = {{4096, 4096, 4096}});

// Parses "4096" (square) or "1000x3000x2000" (m x n x k), either optionally followed by
// ":ld+P" (ld_pad = P, 1 <= P <= kMaxLdPad); nullopt with `error` set otherwise.
std::optional<Shape> parse_shape(std::string_view text, std::string& error);

std::string usage(std::string_view program);

// The whole command line of a program that takes no sizes, only the flags listed (the demos):
// -h or --help prints `usage_text` and gives exit status 0; anything not in `flags` prints an
// error and the usage and gives 2; otherwise nullopt, and the program runs.
std::optional<int> simple_command_line(int argc, char** argv, std::string_view usage_text,
                                       std::initializer_list<std::string_view> flags = {});

}  // namespace gemm
