// JSONL metrics: one JSON object per line, flushed per line so dashboards (and `tail -f`) see every step and
// a killed run leaves at most one torn last line. Schema: docs/metrics.md.
#pragma once
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace alpha {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Opens `path` for appending (a resumed run continues the same file). Throws Error if it cannot.
  explicit MetricsWriter(const std::string& path, bool also_stdout = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Writes {"type": type, ...fields} as one line. Non-finite numbers are written as null (JSON has no NaN).
  void write(const std::string& type, nlohmann::json fields);
  const std::string& path() const { return path_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  bool stdout_ = false;
};

inline constexpr int kMetricsSchemaVersion = 1;

}  // namespace alpha
