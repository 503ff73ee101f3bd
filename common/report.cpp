#include "report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace gemm {
namespace {

// The CSV columns, in order. run_all.sh and the table builder read them by name.
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
                                           "gpu"};

std::string format(char const* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// 50712.3 -> "50,712": thousands separators make a column of GFLOPS readable at a glance.
std::string grouped(double value) {
  std::string const digits = std::to_string(static_cast<long long>(value + 0.5));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

double number(CsvRecord const& record, std::string const& column) {
  auto const it = record.find(column);
  if (it == record.end()) throw std::runtime_error("CSV row has no column '" + column + "'");
  try {
    return std::stod(it->second);
  } catch (std::exception const&) {
    throw std::runtime_error("CSV column '" + column + "' holds '" + it->second +
                             "', not a number");
  }
}

std::string text(CsvRecord const& record, std::string const& column) {
  auto const it = record.find(column);
  if (it == record.end()) throw std::runtime_error("CSV row has no column '" + column + "'");
  return it->second;
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

double median_of(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median_of: no values");
  std::sort(values.begin(), values.end());
  std::size_t const half = values.size() / 2;
  return values.size() % 2 ? values[half] : 0.5 * (values[half - 1] + values[half]);
}

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

std::vector<std::string> parse_csv_line(std::string const& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char const c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
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
                                           m.cublas_check_passed ? "pass" : "FAIL",
                                           m.gpu};
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

std::vector<CsvRecord> parse_csv(std::string const& text) {
  std::istringstream lines(text);
  std::string line;
  std::vector<std::string> header;
  std::vector<CsvRecord> records;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto fields = parse_csv_line(line);
    if (header.empty()) {
      header = std::move(fields);
      continue;
    }
    if (fields == header) continue;  // a header repeated by a concatenated file
    if (fields.size() != header.size()) {
      throw std::runtime_error("CSV row has " + std::to_string(fields.size()) +
                               " fields, header has " + std::to_string(header.size()) + ": " +
                               line);
    }
    CsvRecord record;
    for (std::size_t i = 0; i < header.size(); ++i)
      record[header[i]] = fields[i];
    records.push_back(std::move(record));
  }
  return records;
}

std::string progression_tables(std::vector<CsvRecord> const& records) {
  // Group rows by problem shape, keeping shapes in the order they first appear.
  std::vector<std::string> shape_order;
  std::map<std::string, std::vector<CsvRecord const*>> by_shape;
  for (auto const& record : records) {
    std::string const shape = text(record, "m") + "x" + text(record, "n") + "x" + text(record, "k");
    if (!by_shape.count(shape)) shape_order.push_back(shape);
    by_shape[shape].push_back(&record);
  }
  std::string out;
  for (auto const& shape : shape_order) {
    auto rows = by_shape[shape];
    std::stable_sort(rows.begin(), rows.end(), [](auto const* a, auto const* b) {
      return text(*a, "step") < text(*b, "step");
    });
    out += "#### " + shape + "\n\n";
    out += "| step | kernel | GFLOPS | % of cuBLAS | speedup over previous step | check |\n";
    out += "|---:|---|---:|---:|---:|---|\n";
    double previous_gflops = 0.0;
    std::vector<double> cublas_gflops;
    bool cublas_all_passed = true;
    for (auto const* row : rows) {
      double const gflops = number(*row, "gflops");
      std::string const speedup =
          previous_gflops > 0.0 ? format("%.2fx", gflops / previous_gflops) : "";
      out += "| " + text(*row, "step") + " | " + text(*row, "name") + " | " + grouped(gflops) +
             " | " + format("%.1f%%", number(*row, "pct_cublas")) + " | " + speedup + " | " +
             text(*row, "check") + " |\n";
      previous_gflops = gflops;
      cublas_gflops.push_back(number(*row, "cublas_gflops"));
      cublas_all_passed = cublas_all_passed && text(*row, "cublas_check") == "pass";
    }
    double const median = median_of(cublas_gflops);
    out += "| | cuBLAS (median of the " + std::to_string(cublas_gflops.size()) + " runs) | " +
           grouped(median) + " | 100% | | " + (cublas_all_passed ? "pass" : "FAIL") + " |\n\n";
  }
  return out;
}

}  // namespace gemm
