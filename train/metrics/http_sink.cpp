#include "metrics/http_sink.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <httplib.h>

#include "config/config.h"

namespace alpha {

std::pair<std::string, std::string> split_http_url(const std::string& url) {
  const bool http = url.rfind("http://", 0) == 0, https = url.rfind("https://", 0) == 0;
  ALPHA_CHECK(http || https, ConfigError, "[metrics.http] url \"{}\" must start with http:// or https://", url);
  const size_t host_at = url.find("://") + 3;
  const size_t slash = url.find('/', host_at);
  ALPHA_CHECK(slash != host_at && host_at < url.size(), ConfigError, "[metrics.http] url \"{}\" has no host", url);
  if (slash == std::string::npos) return {url, "/"};
  return {url.substr(0, slash), url.substr(slash)};
}

static std::pair<time_t, time_t> sec_usec(double s) {
  const auto us = static_cast<int64_t>(std::max(0.001, s) * 1e6);
  return {static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000)};
}

HttpSink::HttpSink(HttpSinkOptions opts) : opts_(std::move(opts)) {
  ALPHA_CHECK(opts_.queue_lines > 0 && opts_.batch_lines > 0, ConfigError,
              "[metrics.http] queue_lines ({}) and batch_lines ({}) must be positive", opts_.queue_lines, opts_.batch_lines);
  auto [base, path] = split_http_url(opts_.url);
  path_ = path;
  if (!opts_.token_env.empty()) {
    const char* t = std::getenv(opts_.token_env.c_str());
    ALPHA_CHECK(t != nullptr && *t != '\0', ConfigError,
                "[metrics.http] token_env names \"{}\", but that environment variable is not set", opts_.token_env);
    token_ = t;
  }
  client_ = std::make_unique<httplib::Client>(base);
  ALPHA_CHECK(client_->is_valid(), ConfigError, "[metrics.http] cannot use url \"{}\"", opts_.url);
  const auto [s, us] = sec_usec(opts_.timeout_s);
  client_->set_connection_timeout(s, us);
  client_->set_read_timeout(s, us);
  client_->set_write_timeout(s, us);
  client_->set_keep_alive(true);
  worker_ = std::thread([this] { run(); });
}

HttpSink::~HttpSink() { close(); }

void HttpSink::push(std::string line) noexcept {
  try {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.pushed;
    if (closing_) {
      ++stats_.dropped;
      return;
    }
    if (static_cast<int64_t>(queue_.size()) >= opts_.queue_lines) {  // keep the newest: dashboards want "now"
      queue_.pop_front();
      ++stats_.dropped;
    }
    queue_.push_back(std::move(line));
  } catch (...) {
    // Out of memory while queueing: the line is lost, training goes on.
    return;
  }
  cv_.notify_one();
}

HttpSinkStats HttpSink::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  HttpSinkStats s = stats_;
  s.queued = static_cast<int64_t>(queue_.size()) + in_flight_;
  return s;
}

void HttpSink::close() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!closing_) {
      closing_ = true;
      deadline_ = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(opts_.close_timeout_s * 1e6));
    }
  }
  cv_.notify_all();
  if (!worker_.joinable()) return;
  // Wait for the worker to drain; past the deadline, cut an in-flight request so close() stays bounded.
  {
    std::unique_lock<std::mutex> lk(mu_);
    const bool drained = cv_.wait_until(lk, deadline_, [&] { return queue_.empty() && in_flight_ == 0; });
    if (!drained) {
      lk.unlock();
      client_->stop();
    }
  }
  worker_.join();
}

bool HttpSink::post(const std::string& body, bool* retryable) {
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  httplib::Result res = client_->Post(path_, headers, body, "application/x-ndjson");
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.posts;
  if (res && res->status >= 200 && res->status < 300) return true;
  ++stats_.failed_posts;
  if (res) {
    stats_.last_error = fmt::format("HTTP {}", res->status);
    // Client errors other than timeout/rate-limit will not succeed on retry.
    *retryable = res->status >= 500 || res->status == 408 || res->status == 429;
  } else {
    stats_.last_error = httplib::to_string(res.error());
    *retryable = true;
  }
  return false;
}

void HttpSink::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return closing_ || !queue_.empty(); });
    if (queue_.empty()) break;  // closing and drained
    if (!closing_ && static_cast<int64_t>(queue_.size()) < opts_.batch_lines)
      cv_.wait_for(lk, std::chrono::microseconds(static_cast<int64_t>(opts_.linger_s * 1e6)),
                   [&] { return closing_ || static_cast<int64_t>(queue_.size()) >= opts_.batch_lines; });
    if (closing_ && Clock::now() >= deadline_) break;
    const auto n = std::min<int64_t>(opts_.batch_lines, static_cast<int64_t>(queue_.size()));
    std::string body;
    for (int64_t i = 0; i < n; ++i) {
      body += queue_.front();
      body += '\n';
      queue_.pop_front();
    }
    in_flight_ = n;  // close() waits for these too
    lk.unlock();

    bool ok = false;
    double delay = opts_.backoff_s;
    for (int attempt = 0;; ++attempt) {
      bool retryable = false;
      ok = post(body, &retryable);
      if (ok || !retryable || attempt >= opts_.max_retries) break;
      // Backoff; once closing, no more retries (one attempt per batch keeps close() bounded).
      std::unique_lock<std::mutex> wl(mu_);
      if (cv_.wait_for(wl, std::chrono::microseconds(static_cast<int64_t>(delay * 1e6)), [&] { return closing_; }))
        break;
      delay = std::min(delay * 2, opts_.backoff_max_s);
    }

    lk.lock();
    (ok ? stats_.sent : stats_.dropped) += n;
    in_flight_ = 0;
    cv_.notify_all();
  }
  stats_.dropped += static_cast<int64_t>(queue_.size());
  queue_.clear();
  cv_.notify_all();
}

}  // namespace alpha
