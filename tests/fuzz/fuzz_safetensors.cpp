// Fuzzes the safetensors reader (what `init_from` loads) on a memfd holding the input, then loads the result
// into a tiny GPT with the GPT-2 names. Contract: the file is refused with CheckpointError, or every tensor it
// returns holds exactly its shape's element count and the loader either fills the model or refuses.
#include <cstdint>
#include <cstdlib>

#include "core/rng.h"
#include "tests/fuzz/fuzz_util.h"
#include "checkpoint/checkpoint.h"
#include "model/gpt.h"
#include "checkpoint/safetensors.h"
#include "data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const alpha::fuzz::MemFile file(data, size);
  alpha::fuzz::expect_only<alpha::CheckpointError>([&] {
    nlohmann::json meta;
    const alpha::NamedTensors ts = alpha::read_safetensors(file.path(), &meta);
    for (const auto& [name, t] : ts)
      if (t.numel() != alpha::shape_numel(t.shape())) std::abort();
  });
  static const auto tok = alpha::tokenizer_from_json(nlohmann::json::parse(R"({"kind":"char","chars":[97,98]})"));
  alpha::fuzz::expect_only<alpha::CheckpointError>([&] {
    alpha::Rng rng(0);
    alpha::GPT model(alpha::GPTConfig{1, 1, 4, 4, 2, 0.0, false}, rng);
    alpha::load_safetensors_into(model, file.path(), *tok);
  });
  return 0;
}
