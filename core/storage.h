// Storage: the bytes behind one or more tensors. It may hold a host copy, a device (GPU) copy, or both;
// flags say which copy is current so the dispatcher can move data only when the other side needs it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace alpha {

// A GPU backend's buffer. Implemented by vk/; core only moves bytes through this interface.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void upload(const void* src, size_t nbytes) = 0;  // host -> device (may be queued)
  virtual void download(void* dst, size_t nbytes) = 0;      // device -> host (syncs the queue)
};

class Storage {
 public:
  explicit Storage(size_t nbytes, bool zero_fill = true);  // host storage
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  size_t nbytes() const { return nbytes_; }

  // Host pointer with current contents (downloads from the device if the device copy is newer).
  const std::byte* host_read();
  // Host pointer for writing; the device copy becomes stale.
  std::byte* host_write();

  // Device side, used by GPU backends. attach_device() installs a buffer whose contents are current.
  DeviceBuffer* device() const { return device_.get(); }
  bool host_valid() const { return host_valid_; }
  bool device_valid() const { return device_valid_; }
  void attach_device(std::unique_ptr<DeviceBuffer> buf, bool contents_current);
  void ensure_device_current();  // uploads the host copy if the device copy is stale
  void mark_device_written();    // a GPU kernel wrote it: the host copy becomes stale

  // Bumped by every write of the bytes (host_write, mark_device_written): a derived copy is current while it
  // holds the version it was made from.
  uint64_t version() const { return version_; }
  // A copy derived from these bytes (ops::cast_cached: the f16 copy of an f32 weight) and the version it holds.
  // GpuAdamW rewrites it in the update that changes the weight and stamps it with the new version.
  struct Derived {
    std::shared_ptr<Storage> storage;
    uint64_t version = 0;
  };
  Derived& derived() { return derived_; }

 private:
  void ensure_host_allocated();

  size_t nbytes_;
  std::unique_ptr<std::byte[]> host_;
  std::unique_ptr<DeviceBuffer> device_;
  bool host_valid_ = true;
  bool device_valid_ = false;
  uint64_t version_ = 1;
  Derived derived_;
};

}  // namespace alpha
