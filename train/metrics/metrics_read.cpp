#include "metrics/metrics_read.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "metrics/metrics.h"

namespace alpha {

namespace {

enum class Kind { Int, Number, String, Bool, Object };
struct Field {
  const char* name;
  Kind kind;
  bool required;
};

constexpr bool kReq = true, kOpt = false;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Int: return "an integer";
    case Kind::Number: return "a number or null";
    case Kind::String: return "a string";
    case Kind::Bool: return "a boolean";
    case Kind::Object: return "an object";
  }
  return "?";
}

bool has_kind(const nlohmann::json& v, Kind k) {
  switch (k) {
    case Kind::Int: return v.is_number_integer();
    case Kind::Number: return v.is_number() || v.is_null();  // null: a non-finite value (NaN/inf) was written
    case Kind::String: return v.is_string();
    case Kind::Bool: return v.is_boolean();
    case Kind::Object: return v.is_object();
  }
  return false;
}

// The schema, version 1 (docs/metrics.md has the units and meanings).
const std::vector<Field>* fields_of(std::string_view type) {
  static const std::vector<Field> run = {{"schema", Kind::Int, kReq},           {"config", Kind::Object, kReq},
                                         {"device", Kind::String, kReq},        {"version", Kind::String, kReq},
                                         {"parameters", Kind::Int, kOpt},       {"git_revision", Kind::String, kOpt},
                                         {"flops_per_token", Kind::Number, kOpt}};
  static const std::vector<Field> step = {{"step", Kind::Int, kReq},           {"loss", Kind::Number, kReq},
                                          {"lr", Kind::Number, kReq},          {"grad_norm", Kind::Number, kReq},
                                          {"tokens_per_sec", Kind::Number, kReq}, {"step_ms", Kind::Number, kReq},
                                          {"elapsed_s", Kind::Number, kReq},   {"tokens_seen", Kind::Int, kReq},
                                          {"flops_per_step", Kind::Number, kOpt}, {"mfu", Kind::Number, kOpt},
                                          {"backend", Kind::Object, kOpt},
                                          // MPI runs (issue 17): rank 0's all-reduce figures, the slowest rank
                                          {"world_size", Kind::Int, kOpt},     {"allreduce_ms", Kind::Number, kOpt},
                                          {"allreduce_wait_ms", Kind::Number, kOpt}, {"grad_copy_ms", Kind::Number, kOpt},
                                          {"allreduce_bytes", Kind::Int, kOpt}, {"max_rank_step_ms", Kind::Number, kOpt},
                                          {"max_rank_allreduce_ms", Kind::Number, kOpt}};
  static const std::vector<Field> eval = {{"step", Kind::Int, kReq}, {"train_loss", Kind::Number, kReq},
                                          {"val_loss", Kind::Number, kReq}, {"elapsed_s", Kind::Number, kOpt}};
  static const std::vector<Field> checkpoint = {{"step", Kind::Int, kReq},     {"path", Kind::String, kReq},
                                                {"bytes", Kind::Int, kOpt},    {"seconds", Kind::Number, kOpt},
                                                {"reason", Kind::String, kOpt}};
  static const std::vector<Field> sample = {{"step", Kind::Int, kReq}, {"text", Kind::String, kReq},
                                            {"prompt", Kind::String, kOpt}};
  // A resumed run starts its segment with `resume` instead of `run`: the run fields plus where it resumed.
  static const std::vector<Field> resume = [] {
    std::vector<Field> f = run;
    f.push_back({"step", Kind::Int, kReq});
    f.push_back({"checkpoint", Kind::String, kReq});
    return f;
  }();
  static const std::vector<Field> interrupted = {{"step", Kind::Int, kReq}, {"signal", Kind::Int, kOpt},
                                                 {"checkpoint", Kind::String, kOpt}, {"elapsed_s", Kind::Number, kOpt}};
  static const std::vector<Field> message = {{"message", Kind::String, kReq}, {"step", Kind::Int, kOpt},
                                             {"source", Kind::String, kOpt}};
  static const std::vector<Field> end = {{"step", Kind::Int, kReq},        {"elapsed_s", Kind::Number, kReq},
                                         {"train_loss", Kind::Number, kOpt}, {"val_loss", Kind::Number, kOpt},
                                         {"status", Kind::String, kOpt},   {"http", Kind::Object, kOpt}};
  // The numerics guard (train/loop/guard.h): a bad step, a loss spike, a rollback or a stop.
  static const std::vector<Field> guard = {
      {"step", Kind::Int, kReq},       {"event", Kind::String, kReq},    {"action", Kind::String, kReq},
      {"bad_in_row", Kind::Int, kReq}, {"bad_steps", Kind::Int, kReq},   {"skipped", Kind::Int, kReq},
      {"rollbacks", Kind::Int, kReq},  {"spikes", Kind::Int, kReq},      {"lr_scale", Kind::Number, kReq},
      {"loss", Kind::Number, kOpt},    {"grad_norm", Kind::Number, kOpt}, {"zscore", Kind::Number, kOpt},
      {"origin", Kind::String, kOpt},  {"to_step", Kind::Int, kOpt}};
  // White-box view every metrics.inspect_interval steps (train/inspect/train_inspector.h): objects keyed by
  // parameter / activation name, checked by check_inspect.
  static const std::vector<Field> inspect = {{"step", Kind::Int, kReq}, {"params", Kind::Object, kReq},
                                             {"activations", Kind::Object, kReq}};
  if (type == "run") return &run;
  if (type == "step") return &step;
  if (type == "inspect") return &inspect;
  if (type == "eval") return &eval;
  if (type == "checkpoint") return &checkpoint;
  if (type == "sample") return &sample;
  if (type == "resume") return &resume;
  if (type == "interrupted") return &interrupted;
  if (type == "warning" || type == "error") return &message;
  if (type == "end") return &end;
  if (type == "guard") return &guard;
  return nullptr;
}

std::string check_fields(const nlohmann::json& r, const std::vector<Field>& fields, const std::string& what) {
  for (const Field& f : fields) {
    auto it = r.find(f.name);
    if (it == r.end()) {
      if (f.required) return fmt::format("[metrics] {}: missing \"{}\"", what, f.name);
      continue;
    }
    if (!has_kind(*it, f.kind))
      return fmt::format("[metrics] {}: \"{}\" must be {} (got {})", what, f.name, kind_name(f.kind), it->type_name());
  }
  return "";
}

std::string check_backend(const nlohmann::json& b) {
  static const std::vector<Field> fields = {{"cpu_ops", Kind::Int, kReq},       {"gpu_ops", Kind::Int, kReq},
                                            {"gpu_op_fraction", Kind::Number, kReq}, {"queue_flushes", Kind::Int, kOpt},
                                            {"dispatches", Kind::Int, kOpt},    {"syncs", Kind::Int, kOpt},
                                            {"host_reads", Kind::Int, kOpt},
                                            {"bytes_up", Kind::Int, kOpt},      {"bytes_down", Kind::Int, kOpt},
                                            {"gpu_wait_ms", Kind::Number, kOpt}, {"gpu_ms", Kind::Object, kOpt}};
  std::string e = check_fields(b, fields, "step record's backend");
  if (!e.empty() || !b.contains("gpu_ms")) return e;
  for (const auto& [k, v] : b["gpu_ms"].items())
    if (!v.is_number()) return fmt::format("[metrics] step record's backend: gpu_ms[\"{}\"] must be a number", k);
  return "";
}

// Every params entry has grad_norm, weight_norm, update_ratio; every activations entry mean, std, max_abs, frac_zero,
// frac_f16_sat (numbers, or null when not finite).
std::string check_inspect(const nlohmann::json& r) {
  static const std::vector<Field> param = {{"grad_norm", Kind::Number, kReq}, {"weight_norm", Kind::Number, kReq},
                                           {"update_ratio", Kind::Number, kReq}};
  static const std::vector<Field> act = {{"mean", Kind::Number, kReq},      {"std", Kind::Number, kReq},
                                         {"max_abs", Kind::Number, kReq},   {"frac_zero", Kind::Number, kReq},
                                         {"frac_f16_sat", Kind::Number, kReq}};
  for (const auto& [group, fields] : {std::pair{"params", &param}, {"activations", &act}})
    for (const auto& [k, v] : r[group].items()) {
      const std::string what = fmt::format("inspect record's {}[\"{}\"]", group, k);
      if (!v.is_object()) return fmt::format("[metrics] {} must be an object", what);
      if (std::string e = check_fields(v, *fields, what); !e.empty()) return e;
    }
  return "";
}

}  // namespace

std::string validate_record(const nlohmann::json& r) {
  if (!r.is_object()) return fmt::format("[metrics] a record must be a JSON object (got {})", r.type_name());
  auto t = r.find("type");
  if (t == r.end() || !t->is_string()) return "[metrics] record: missing string \"type\"";
  const std::string type = t->get<std::string>();
  const std::vector<Field>* fields = fields_of(type);
  if (!fields) return fmt::format("[metrics] unknown record type \"{}\"", type);
  const std::string what = type + " record";
  auto tm = r.find("time");
  if (tm == r.end() || !tm->is_number() || tm->get<double>() <= 0)
    return fmt::format("[metrics] {}: \"time\" must be a positive number (unix seconds)", what);
  if (std::string e = check_fields(r, *fields, what); !e.empty()) return e;
  if ((type == "run" || type == "resume") && r["schema"].get<int64_t>() != kMetricsSchemaVersion)
    return fmt::format("[metrics] {}: schema {} is not the supported version {}", what, r["schema"].get<int64_t>(),
                       kMetricsSchemaVersion);
  if (r.contains("step") && r["step"].get<int64_t>() < 0)
    return fmt::format("[metrics] {}: \"step\" must be >= 0 (got {})", what, r["step"].get<int64_t>());
  if (type == "step" && r.contains("backend")) return check_backend(r["backend"]);
  if (type == "inspect") return check_inspect(r);
  return "";
}

// Splits `pending` at newlines: complete lines are parsed into `out`, the unfinished rest stays in `pending`.
static void take_lines(std::string& pending, MetricsLines& out) {
  size_t start = 0;
  for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(pending.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) out.records.push_back(std::move(j));
    else ++out.bad_lines;
  }
  pending.erase(0, start);
  out.torn_tail = !pending.empty();
}

MetricsLines MetricsTail::poll() {
  MetricsLines out;
  std::FILE* f = std::fopen(path_.c_str(), "rb");
  if (!f) return out;
  std::fseek(f, 0, SEEK_END);
  const int64_t size = std::ftell(f);
  if (size < offset_) {  // rewritten or truncated: start over
    offset_ = 0;
    pending_.clear();
    out.truncated = true;
  }
  std::fseek(f, offset_, SEEK_SET);
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) {
    pending_.append(buf, n);
    offset_ += static_cast<int64_t>(n);
  }
  std::fclose(f);
  take_lines(pending_, out);
  return out;
}

MetricsLines read_metrics_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ALPHA_CHECK(f != nullptr, Error, "[metrics] cannot open \"{}\": {}", path, std::strerror(errno));
  std::fclose(f);
  MetricsTail tail(path);
  MetricsLines out = tail.poll();
  if (out.torn_tail) {
    // The writer is gone: a tail that is a whole object lacking only its newline is still a record.
    nlohmann::json j = nlohmann::json::parse(tail.pending(), nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) out.records.push_back(std::move(j));
  }
  return out;
}

}  // namespace alpha
