// Fuzzes the checkpoint reader the way `alpha sample` / `alpha eval` use it: read and validate the ALPH file,
// decode the run header, load the tokenizer, build the model and copy the weights in. The header checksum is
// recomputed first (when the declared length fits) so mutations reach the JSON header and tensor table instead of
// stopping at "checksum mismatch". Contract: it all succeeds, or CheckpointError is thrown.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "tests/fuzz/fuzz_util.h"
#include "checkpoint/checkpoint.h"
#include "model/gpt.h"
#include "loop/run_checkpoint.h"
#include "data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (size >= alpha::kCheckpointPreamble + 8) {
    uint64_t hlen = 0;
    std::memcpy(&hlen, bytes.data() + 8, 8);
    if (hlen <= size - alpha::kCheckpointPreamble - 8) {
      const size_t head = alpha::kCheckpointPreamble + hlen;
      const uint64_t sum = alpha::fnv1a64(bytes.data(), head);
      std::memcpy(bytes.data() + head, &sum, 8);
    }
  }
  const alpha::fuzz::MemFile file(bytes.data(), bytes.size());
  alpha::fuzz::expect_only<alpha::CheckpointError>([&] {
    const alpha::RunCheckpoint ck = alpha::load_run_checkpoint(file.path());
    std::unique_ptr<alpha::Tokenizer> tok;
    try {
      tok = alpha::tokenizer_from_json(ck.tokenizer);
    } catch (const alpha::ValueError&) {
      return;  // `alpha sample` reports it as a CheckpointError "bad tokenizer"
    }
    alpha::Rng rng(0);
    alpha::GPT model(ck.model, rng);
    alpha::restore_run(ck, model, nullptr);
  });
  return 0;
}
