#include "train/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace alpha {

MetricsWriter::MetricsWriter(const std::string& path, bool also_stdout) : path_(path), stdout_(also_stdout) {
  file_ = std::fopen(path.c_str(), "a");
  ALPHA_CHECK(file_ != nullptr, Error, "[metrics] cannot open \"{}\" for appending: {}", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

static void scrub(nlohmann::json& j) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) j = nullptr;
  else if (j.is_object() || j.is_array())
    for (auto& v : j) scrub(v);
}

void MetricsWriter::write(const std::string& type, nlohmann::json fields) {
  nlohmann::json line = {{"type", type}};
  line.update(fields);
  scrub(line);
  const std::string s = line.dump() + "\n";
  if (file_) {
    std::fwrite(s.data(), 1, s.size(), file_);
    std::fflush(file_);
  }
  if (stdout_) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace alpha
