#include "report.h"

#include <cstdio>
#include <vector>

namespace gemm {
namespace {

// The CSV columns, in order. results.py reads them by name. New columns go last (ld_pad did),
// so that every older column keeps its place; results.py reads a file without ld_pad as 0.
std::vector<std::string> const kColumns = {"step",
                                           "name",
                                           "precision",
                                           "m",
                                           "n",
                                           "k",
                                           "alpha",
                                           "beta",
                                           "time_ms",
                                           "gflops",
                                           "cublas_time_ms",
                                           "cublas_gflops",
                                           "pct_cublas",
                                           "check",
                                           "max_err_over_bound",
                                           "rel_error",
                                           "cublas_check",
                                           "gpu",
                                           "ld_pad"};

std::string format(char const* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::string join_fields(std::vector<std::string> const& fields) {
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line += ',';
    line += csv_escape(fields[i]);
  }
  return line;
}

}  // namespace

std::pair<std::string, std::string> split_step_name(std::string const& directory_name) {
  auto const underscore = directory_name.find('_');
  if (underscore == std::string::npos) return {directory_name, directory_name};
  return {directory_name.substr(0, underscore), directory_name.substr(underscore + 1)};
}

std::string csv_escape(std::string const& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  std::string quoted = "\"";
  for (char c : field) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string csv_header() {
  return join_fields(kColumns);
}

std::string csv_row(Measurement const& m) {
  std::vector<std::string> const fields = {m.step,
                                           m.name,
                                           m.precision,
                                           std::to_string(m.shape.m),
                                           std::to_string(m.shape.n),
                                           std::to_string(m.shape.k),
                                           format("%g", m.alpha),
                                           format("%g", m.beta),
                                           format("%.4f", m.step_ms),
                                           format("%.1f", m.gflops()),
                                           format("%.4f", m.cublas_ms),
                                           format("%.1f", m.cublas_gflops()),
                                           format("%.1f", m.percent_of_cublas()),
                                           m.check_passed ? "pass" : "FAIL",
                                           format("%.3g", m.max_error_over_bound),
                                           format("%.3g", m.relative_error),
                                           !m.cublas_ran           ? "none"
                                           : m.cublas_check_passed ? "pass"
                                                                   : "FAIL",
                                           m.gpu,
                                           std::to_string(m.shape.ld_pad)};
  return join_fields(fields);
}

std::string human_header() {
  char line[200];
  std::snprintf(line, sizeof line, "%-22s %10s %10s %10s %10s %9s  %s", "problem (MxNxK)",
                "step ms", "GFLOPS", "cuBLAS ms", "GFLOPS", "% cuBLAS", "check");
  return line;
}

std::string human_row(Measurement const& m, std::string const& check_summary) {
  char line[512];
  std::snprintf(line, sizeof line, "%-22s %10.3f %10.1f %10.3f %10.1f %8.1f%%  %s",
                m.shape.text().c_str(), m.step_ms, m.gflops(), m.cublas_ms, m.cublas_gflops(),
                m.percent_of_cublas(), check_summary.c_str());
  return line;
}

}  // namespace gemm
