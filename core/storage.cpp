#include "core/storage.h"

#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/error.h"

namespace alpha {

namespace {
// Training allocates the same activation sizes every step. glibc serves blocks >= 128 KiB with fresh mmaps
// whose pages fault on first touch (half the time of a small GEMM); keeping them on the heap lets freed
// blocks be reused. Measured: 768x128x384 sgemm 0.57 -> 0.30 ms on 2 cores. Trimming is off (-1): a step that
// frees more than the trim threshold at the heap's top (GPT-2 small frees ~2 GB) would hand the pages back
// and fault them all in again next step.
bool tune_host_allocator() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, -1);
#endif
  return true;
}
}  // namespace

Storage::Storage(size_t nbytes, bool zero_fill) : nbytes_(nbytes) {
  static const bool tuned = tune_host_allocator();
  (void)tuned;
  ensure_host_allocated();
  if (zero_fill && nbytes_) std::memset(host_.get(), 0, nbytes_);
}

void Storage::ensure_host_allocated() {
  // for_overwrite: no value-initialization, so a GPU output never touches its host pages until read.
  if (!host_) host_ = std::make_unique_for_overwrite<std::byte[]>(nbytes_ ? nbytes_ : 1);
}

const std::byte* Storage::host_read() {
  if (!host_valid_) {
    ensure_host_allocated();
    ALPHA_CHECK(device_ != nullptr, Error, "[storage] no valid copy of a {}-byte buffer", nbytes_);
    device_->download(host_.get(), nbytes_);
    host_valid_ = true;
  }
  return host_.get();
}

std::byte* Storage::host_write() {
  host_read();
  device_valid_ = false;
  ++version_;
  return host_.get();
}

void Storage::attach_device(std::unique_ptr<DeviceBuffer> buf, bool contents_current) {
  device_ = std::move(buf);
  device_valid_ = contents_current;
  if (contents_current) host_valid_ = false;
}

void Storage::ensure_device_current() {
  ALPHA_CHECK(device_ != nullptr, Error, "[storage] no device buffer attached");
  if (!device_valid_) {
    device_->upload(host_read(), nbytes_);
    device_valid_ = true;
  }
}

void Storage::mark_device_written() {
  ++version_;
  device_valid_ = true;
  host_valid_ = false;
}

}  // namespace alpha
