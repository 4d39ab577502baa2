// Shared by the libFuzzer targets: the fuzz input as a file (the readers take paths) and the contract check
// "only the documented error type may escape". Anything else, and every crash, leak or UB report, is a finding.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <typeinfo>

namespace alpha::fuzz {

// An anonymous in-memory file (memfd) holding `size` bytes, opened by path through /proc/self/fd.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) : fd_(memfd_create("alpha_fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// Runs f(); an exception of type Expected is the reader refusing bad input (fine); any other escape aborts.
template <class Expected, class F>
void expect_only(F&& f) {
  try {
    f();
  } catch (const Expected&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

}  // namespace alpha::fuzz
