#include "metrics/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace alpha {

Progress::Progress(int64_t total_steps, bool quiet)
    : total_(total_steps), every_(std::max<int64_t>(1, total_steps / 20)), tty_(isatty(STDERR_FILENO) != 0), quiet_(quiet) {}

static std::string eta_str(double s) {
  if (s < 0 || s > 1e7) return "?";
  const auto t = static_cast<int64_t>(s);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

void Progress::clear_live() {
  if (live_) {
    std::fputs("\r\033[K", stderr);
    live_ = false;
  }
}

void Progress::step(int64_t step, double loss, double lr, double tps, double elapsed) {
  if (quiet_) return;
  const double eta = step > 0 ? elapsed / static_cast<double>(step) * static_cast<double>(total_ - step) : -1;
  const std::string val = last_val_ >= 0 ? fmt::format(" val {:.4f}", last_val_) : "";
  const std::string line = fmt::format("step {}/{} loss {:.4f}{} lr {:.2e} {:.0f} tok/s ETA {}", step, total_, loss, val,
                                       lr, tps, eta_str(eta));
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    live_ = true;
  } else if (step % every_ == 0 || step == total_ || step == 1) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

void Progress::eval(int64_t step, double train_loss, double val_loss) {
  last_val_ = val_loss;
  message(fmt::format("step {}: train loss {:.4f}, val loss {:.4f}", step, train_loss, val_loss));
}

void Progress::message(const std::string& line) {
  if (quiet_) return;
  clear_live();
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void Progress::task(const std::string& what, int64_t done, int64_t total) {
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  if (what != task_ || done == 0) {
    task_ = what;
    task_start_ = now;
  }
  if (done >= total) {
    const double s = std::chrono::duration<double>(now - task_start_).count();
    message(fmt::format("{}: {} in {:.1f} s", what, total, s));
    task_.clear();
  } else if (tty_) {
    const double pct = total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0;
    std::fprintf(stderr, "\r\033[K%s %lld/%lld (%.0f%%)", what.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), pct);
    std::fflush(stderr);
    live_ = true;
  }
}

void Progress::finish() { clear_live(); }

}  // namespace alpha
