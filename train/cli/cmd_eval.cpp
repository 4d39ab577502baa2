// `alpha eval CHECKPOINT [--data PATH] [--iters N]`: mean cross-entropy and perplexity of a trained model over
// the validation split of its training data (or any text file), without gradients. Deterministic: batches are
// consecutive non-overlapping block_size windows from the start of the tokens, not random draws.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "cli/cli.h"
#include "cli/cmd_util.h"
#include "data/data.h"
#include "loop/device.h"

namespace alpha {

namespace {

constexpr const char* kEvalHelp = R"(usage: alpha eval CHECKPOINT [--data PATH] [--iters N] [--device cpu|auto|vulkan|vulkan:N]

Prints the mean cross-entropy loss and perplexity (exp(loss)) of the model in CHECKPOINT, without gradients.
Tokens: the validation split of the checkpoint's data.path (its tail data.val_fraction), or the text file PATH
tokenized with the checkpoint's tokenizer. They are cut into consecutive non-overlapping windows of block_size
+ 1 tokens; --iters N evaluates at most N batches of train.batch_size windows (default: all windows).
exit codes: 0 ok, 1 runtime error, 2 usage error, 3 bad data, 4 checkpoint error
)";

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ALPHA_CHECK(f.good(), DataError, "[data] cannot read \"{}\"", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int cmd_eval(const std::vector<std::string>& args) {
  CmdArgs a("eval", args, {"--data", "--iters", "--device"});
  if (a.help) {
    std::fputs(kEvalHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return a.usage(a.error);
  if (a.positional.size() != 1) return a.usage("eval needs exactly one CHECKPOINT");
  int64_t iters = 0;
  try {
    iters = a.get_int("--iters", 0, 1);
  } catch (const CmdArgError& e) {
    return a.usage(e.what());
  }
  const LoadedModel lm = load_model_for_inference(a.positional[0]);
  const std::string data_path = a.get("--data", lm.ck.config.data.path);
  const std::string text = read_text(data_path);
  std::vector<int32_t> tokens;
  try {
    tokens = lm.tokenizer->encode(text);
  } catch (const ValueError& e) {
    throw DataError(fmt::format("[data] \"{}\" cannot be encoded with the checkpoint's tokenizer: {}", data_path, e.what()));
  }
  if (!a.values.count("--data")) {  // the val split, exactly as training cut it
    const int64_t n = static_cast<int64_t>(tokens.size());
    const int64_t n_train = static_cast<int64_t>(static_cast<double>(n) * (1.0 - lm.ck.config.data.val_fraction));
    tokens.erase(tokens.begin(), tokens.begin() + n_train);
  }
  const int64_t T = lm.ck.model.block_size, n = static_cast<int64_t>(tokens.size());
  ALPHA_CHECK(n >= T + 1, DataError, "[data] \"{}\": {} tokens to evaluate, need at least block_size + 1 = {}",
              data_path, n, T + 1);
  const int64_t B = std::max<int64_t>(1, lm.ck.config.train.batch_size);
  int64_t windows = n / (T + 1);
  if (iters > 0) windows = std::min(windows, iters * B);

  DeviceScope scope(a.get("--device", "cpu"));
  ag::NoGrad no_grad;
  Rng unused(0);
  double total = 0;  // sum over windows of the window's mean loss (all windows hold T targets)
  for (int64_t w0 = 0; w0 < windows; w0 += B) {
    const int64_t nb = std::min(B, windows - w0);
    std::vector<int32_t> x(static_cast<size_t>(nb * T)), y(x.size());
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t t = 0; t < T; ++t) {
        x[b * T + t] = tokens[(w0 + b) * (T + 1) + t];
        y[b * T + t] = tokens[(w0 + b) * (T + 1) + t + 1];
      }
    total += lm.model.loss(Tensor::from_vector(x, {nb, T}), Tensor::from_vector(y, {nb, T}), false, unused).item() *
             static_cast<double>(nb);
  }
  const double loss = total / static_cast<double>(windows);
  std::printf("loss %.6f perplexity %.4f (%lld windows of %lld tokens from %s)\n", loss, std::exp(loss),
              static_cast<long long>(windows), static_cast<long long>(T), data_path.c_str());
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace alpha
