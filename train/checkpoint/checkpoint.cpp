// ALPH v2 reader and writer. Layout (docs/checkpoint-format.md), all integers little-endian:
//   [0,4) "ALPH" | [4,8) u32 version | [8,16) u64 header length H | [16,16+H) JSON header |
//   [16+H,24+H) u64 FNV-1a of bytes [0,16+H) | zero padding to data_start = align64(24+H) |
//   data_bytes bytes of tensor data, tensor i at data_start + offset_i (64-aligned), gaps zero; EOF.
#include "checkpoint/checkpoint.h"
#include "config/json_limits.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace alpha {

static_assert(std::endian::native == std::endian::little, "the checkpoint writer assumes a little-endian host");

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

bool CheckpointFile::has(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& nt) { return nt.first == name; });
}

const Tensor& CheckpointFile::get(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw CheckpointError(fmt::format("[checkpoint] missing tensor \"{}\"", name));
}

namespace {

uint64_t align_up(uint64_t x) { return (x + kCheckpointAlign - 1) / kCheckpointAlign * kCheckpointAlign; }

std::string hex16(uint64_t v) { return fmt::format("{:016x}", v); }

const std::byte* tensor_bytes(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f32: return reinterpret_cast<const std::byte*>(t.data<float>());
    case DType::f64: return reinterpret_cast<const std::byte*>(t.data<double>());
    case DType::i32: return reinterpret_cast<const std::byte*>(t.data<int32_t>());
    default: throw CheckpointError(fmt::format("[checkpoint] cannot store a {} tensor", dtype_name(t.dtype())));
  }
}

std::byte* tensor_bytes_mut(Tensor& t) {
  switch (t.dtype()) {
    case DType::f32: return reinterpret_cast<std::byte*>(t.mutable_data<float>());
    case DType::f64: return reinterpret_cast<std::byte*>(t.mutable_data<double>());
    default: return reinterpret_cast<std::byte*>(t.mutable_data<int32_t>());
  }
}

// Closes the descriptor and deletes the temp file unless commit() ran: a failed write leaves nothing behind.
struct TempFile {
  std::string path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!committed) ::unlink(path.c_str());
  }
};

[[noreturn]] void sys_fail(const std::string& what, const std::string& path) {
  throw CheckpointError(fmt::format("[checkpoint] {} \"{}\" failed: {}", what, path, std::strerror(errno)));
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) sys_fail("writing", path);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void fsync_dir(const std::string& file_path) {
  std::filesystem::path parent = std::filesystem::path(file_path).parent_path();
  if (parent.empty()) parent = std::filesystem::path(".");
  const std::string dir = parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) sys_fail("opening directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) sys_fail("fsync of directory", dir);
}

// Streams `write_body(fd)` into path.tmp, then fsync, rename onto `path`, fsync the directory.
template <class F>
void atomic_replace(const std::string& path, F&& write_body) {
  TempFile tmp{path + ".tmp"};
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd < 0) sys_fail("creating", tmp.path);
  write_body(tmp.fd, tmp.path);
  if (::fsync(tmp.fd) != 0) sys_fail("fsync of", tmp.path);
  const int rc = ::close(tmp.fd);
  tmp.fd = -1;
  if (rc != 0) sys_fail("closing", tmp.path);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) sys_fail("renaming onto", path);
  tmp.committed = true;
  fsync_dir(path);
}

void read_at(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) sys_fail("reading", path);
    if (r == 0) throw CheckpointError(fmt::format("[checkpoint] \"{}\" is truncated (unexpected end of file)", path));
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t offset, nbytes, checksum;
};

// One tensor-table entry, every field type- and range-checked; sizes are checked for overflow before use.
Entry parse_entry(const nlohmann::json& e, size_t i, uint64_t data_bytes, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return CheckpointError(fmt::format("[checkpoint] \"{}\": tensor table entry {} {}", path, i, why));
  };
  if (!e.is_object()) throw bad("is not an object");
  for (const char* k : {"name", "dtype", "shape", "offset", "nbytes", "checksum"})
    if (!e.contains(k)) throw bad(fmt::format("lacks \"{}\"", k));
  Entry out;
  if (!e["name"].is_string() || e["name"].get<std::string>().empty()) throw bad("has no name");
  out.name = e["name"].get<std::string>();
  const std::string dt = e["dtype"].is_string() ? e["dtype"].get<std::string>() : "";
  if (dt == "f32") out.dtype = DType::f32;
  else if (dt == "f64") out.dtype = DType::f64;
  else if (dt == "i32") out.dtype = DType::i32;
  else throw bad(fmt::format("(\"{}\") has unknown dtype {}", out.name, e["dtype"].dump()));
  if (!e["shape"].is_array() || e["shape"].size() > 8) throw bad(fmt::format("(\"{}\") has a bad shape", out.name));
  uint64_t numel = 1;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) throw bad(fmt::format("(\"{}\") has a bad shape {}", out.name, e["shape"].dump()));
    const uint64_t dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, dim, &numel))
      throw bad(fmt::format("(\"{}\"): shape {} overflows", out.name, e["shape"].dump()));
    out.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t want = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(out.dtype)), &want))
    throw bad(fmt::format("(\"{}\"): shape {} overflows", out.name, e["shape"].dump()));
  if (!e["offset"].is_number_unsigned() || !e["nbytes"].is_number_unsigned())
    throw bad(fmt::format("(\"{}\") has a bad offset or nbytes", out.name));
  out.offset = e["offset"].get<uint64_t>();
  out.nbytes = e["nbytes"].get<uint64_t>();
  if (out.nbytes != want)
    throw bad(fmt::format("(\"{}\"): nbytes {} does not match shape {} ({} bytes)", out.name, out.nbytes,
                          e["shape"].dump(), want));
  uint64_t end = 0;
  if (out.offset % kCheckpointAlign != 0 || __builtin_add_overflow(out.offset, out.nbytes, &end) || end > data_bytes)
    throw bad(fmt::format("(\"{}\"): bytes [{}, +{}) lie outside the {}-byte data section or are misaligned", out.name,
                          out.offset, out.nbytes, data_bytes));
  const std::string cs = e["checksum"].is_string() ? e["checksum"].get<std::string>() : "";
  if (cs.size() != 16 || cs.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw bad(fmt::format("(\"{}\") has a bad checksum field", out.name));
  out.checksum = std::stoull(cs, nullptr, 16);
  return out;
}

void check_zero(int fd, uint64_t begin, uint64_t end, const std::string& path) {
  char buf[256];
  while (begin < end) {
    const uint64_t n = std::min<uint64_t>(sizeof buf, end - begin);
    read_at(fd, buf, n, begin, path);
    for (uint64_t i = 0; i < n; ++i)
      if (buf[i] != 0) throw CheckpointError(fmt::format("[checkpoint] \"{}\": padding byte at {} is not zero", path, begin + i));
    begin += n;
  }
}

}  // namespace

void write_checkpoint(const std::string& path, const nlohmann::json& meta, const NamedTensors& tensors) {
  ALPHA_CHECK(meta.is_object(), CheckpointError, "[checkpoint] header metadata must be a JSON object");
  nlohmann::json header = meta;
  nlohmann::json table = nlohmann::json::array();
  std::vector<const std::byte*> ptrs;
  std::vector<Tensor> keep;  // contiguous copies stay alive until written
  uint64_t off = 0;
  for (const auto& [name, t0] : tensors) {
    keep.push_back(t0.contiguous());
    const Tensor& t = keep.back();
    const std::byte* p = tensor_bytes(t);
    const uint64_t nb = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    ptrs.push_back(p);
    table.push_back({{"name", name}, {"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"offset", off},
                     {"nbytes", nb}, {"checksum", hex16(fnv1a64(p, nb))}});
    off = align_up(off + nb);
  }
  // data_bytes ends at the last tensor's end (no trailing padding), so EOF is exactly data_start + data_bytes.
  const uint64_t data_bytes = table.empty() ? 0 : table.back()["offset"].get<uint64_t>() + table.back()["nbytes"].get<uint64_t>();
  header["tensors"] = table;
  header["data_bytes"] = data_bytes;
  const std::string json = header.dump();
  std::string pre(kCheckpointPreamble, '\0');
  std::memcpy(pre.data(), kCheckpointMagic, 4);
  const uint32_t ver = kCheckpointVersion;
  const uint64_t hlen = json.size();
  std::memcpy(pre.data() + 4, &ver, 4);
  std::memcpy(pre.data() + 8, &hlen, 8);
  std::string head = pre + json;
  const uint64_t hsum = fnv1a64(head.data(), head.size());
  head.append(reinterpret_cast<const char*>(&hsum), 8);
  head.resize(align_up(head.size()), '\0');

  atomic_replace(path, [&](int fd, const std::string& tmp) {
    write_all(fd, head.data(), head.size(), tmp);
    static const char zeros[kCheckpointAlign] = {};
    uint64_t pos = 0;
    for (size_t i = 0; i < keep.size(); ++i) {
      const uint64_t o = table[i]["offset"].get<uint64_t>(), nb = table[i]["nbytes"].get<uint64_t>();
      write_all(fd, zeros, o - pos, tmp);
      write_all(fd, ptrs[i], nb, tmp);
      pos = o + nb;
    }
  });
}

void write_file_atomic(const std::string& path, const std::string& text) {
  atomic_replace(path, [&](int fd, const std::string& tmp) { write_all(fd, text.data(), text.size(), tmp); });
}

CheckpointFile read_checkpoint(const std::string& path, bool header_only) {
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0)
    throw CheckpointError(fmt::format("[checkpoint] cannot open \"{}\": {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) sys_fail("stat of", path);
  if (!S_ISREG(st.st_mode)) throw CheckpointError(fmt::format("[checkpoint] \"{}\" is not a regular file", path));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kCheckpointPreamble + 8)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\" is truncated: {} bytes is shorter than the preamble", path, size));
  unsigned char pre[kCheckpointPreamble];
  read_at(f.fd, pre, kCheckpointPreamble, 0, path);
  if (std::memcmp(pre, kCheckpointMagic, 4) != 0)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\" is not an Alpha checkpoint (wrong magic)", path));
  uint32_t ver = 0;
  uint64_t hlen = 0;
  std::memcpy(&ver, pre + 4, 4);
  std::memcpy(&hlen, pre + 8, 8);
  if (ver != kCheckpointVersion)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\" has unknown format version {} (this build reads {})", path,
                                      ver, kCheckpointVersion));
  if (hlen > size - kCheckpointPreamble - 8)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": header length {} is longer than the {}-byte file", path,
                                      hlen, size));
  std::string head(kCheckpointPreamble + hlen, '\0');
  read_at(f.fd, head.data(), head.size(), 0, path);
  uint64_t stored = 0;
  read_at(f.fd, &stored, 8, head.size(), path);
  if (fnv1a64(head.data(), head.size()) != stored)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": header checksum mismatch (file damaged)", path));
  const size_t depth = json_nesting_depth(std::string_view(head).substr(kCheckpointPreamble));
  if (depth > kMaxJsonDepth)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": JSON header nested {} levels deep (the limit is {})", path,
                                      depth, kMaxJsonDepth));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(head.begin() + kCheckpointPreamble, head.end());
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": bad JSON header: {}", path, e.what()));
  }
  if (!header.is_object() || !header.contains("tensors") || !header["tensors"].is_array() ||
      !header.contains("data_bytes") || !header["data_bytes"].is_number_unsigned())
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": header lacks the tensor table or data_bytes", path));
  const uint64_t data_start = align_up(kCheckpointPreamble + hlen + 8);
  const uint64_t data_bytes = header["data_bytes"].get<uint64_t>();
  if (data_start > size || data_bytes > size - data_start)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\" is truncated: {} bytes, the header describes {}", path, size,
                                      data_start > size ? data_start : data_start + data_bytes));
  if (data_start + data_bytes != size)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\" has {} unexpected trailing bytes", path, size - data_start - data_bytes));

  std::vector<Entry> entries;
  const auto& table = header["tensors"];
  for (size_t i = 0; i < table.size(); ++i) {
    entries.push_back(parse_entry(table[i], i, data_bytes, path));
    for (size_t j = 0; j < i; ++j)
      if (entries[j].name == entries[i].name)
        throw CheckpointError(fmt::format("[checkpoint] \"{}\": tensor \"{}\" appears twice", path, entries[i].name));
  }
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entries[a].offset < entries[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const Entry &a = entries[order[k - 1]], &b = entries[order[k]];
    if (a.offset + a.nbytes > b.offset)
      throw CheckpointError(fmt::format("[checkpoint] \"{}\": tensors \"{}\" and \"{}\" overlap", path, a.name, b.name));
  }
  const uint64_t last_end = order.empty() ? 0 : entries[order.back()].offset + entries[order.back()].nbytes;
  if (last_end != data_bytes)
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": data_bytes {} does not end at the last tensor ({})", path,
                                      data_bytes, last_end));

  CheckpointFile out;
  out.meta = header;
  out.meta.erase("tensors");
  if (header_only) return out;
  // Every byte is covered: header checksum, zero padding, per-tensor checksums.
  check_zero(f.fd, kCheckpointPreamble + hlen + 8, data_start, path);
  uint64_t pos = 0;
  for (size_t k : order) {
    const Entry& e = entries[k];
    check_zero(f.fd, data_start + pos, data_start + e.offset, path);
    pos = e.offset + e.nbytes;
  }
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    std::byte* dst = tensor_bytes_mut(t);
    read_at(f.fd, dst, e.nbytes, data_start + e.offset, path);
    if (fnv1a64(dst, e.nbytes) != e.checksum)
      throw CheckpointError(fmt::format("[checkpoint] \"{}\": checksum mismatch in tensor \"{}\" (file damaged)", path, e.name));
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

}  // namespace alpha
