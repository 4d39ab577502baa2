// The ALPH v2 checkpoint container (byte layout: docs/checkpoint-format.md): a checksummed JSON header and a
// table of aligned, checksummed tensors. Writes are crash-safe (tmp file, fsync, rename, fsync directory);
// reads validate every size and offset against the file size before allocating, so a damaged or hostile file
// is rejected with a specific CheckpointError and never costs more memory than its own size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/tensor.h"

namespace alpha {

// Missing, unreadable, damaged or incompatible checkpoint. Messages start with "[checkpoint]"; the CLI exits 4.
class CheckpointError : public Error {
  using Error::Error;
};

inline constexpr char kCheckpointMagic[4] = {'A', 'L', 'P', 'H'};
inline constexpr uint32_t kCheckpointVersion = 2;
inline constexpr uint64_t kCheckpointAlign = 64;     // data section and every tensor start on this boundary
inline constexpr uint64_t kCheckpointPreamble = 16;  // magic (4) + version u32 (4) + header length u64 (8)

// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over bytes; `h` chains calls. Every
// single-byte change alters the result (each step is a bijection of the state), so bit flips never pass.
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnvOffset);

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct CheckpointFile {
  nlohmann::json meta;  // the header without its "tensors" table
  NamedTensors tensors;  // contiguous host tensors, in file order
  bool has(const std::string& name) const;
  // The tensor `name`; CheckpointError "missing tensor" when absent.
  const Tensor& get(const std::string& name) const;
};

// Writes `meta` (a JSON object; "tensors" and "data_bytes" are added) and the tensors to `path` crash-safely:
// path + ".tmp", fsync, rename over `path`, fsync the directory. Throws CheckpointError (naming the path and
// the system error) and removes the temp file if any step fails; an existing `path` is then untouched.
void write_checkpoint(const std::string& path, const nlohmann::json& meta, const NamedTensors& tensors);

// Reads and validates a checkpoint. header_only: validate the preamble, header checksum and tensor table
// against the file size, but load no tensor data (retention and `alpha export` peek at headers this way).
CheckpointFile read_checkpoint(const std::string& path, bool header_only = false);

// Atomically replaces the small text file `path` with `text` (same tmp/fsync/rename/fsync-dir sequence).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace alpha
