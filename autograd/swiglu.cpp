// MLP activations of Llama-style blocks: SwiGLU (two inputs, or the halves of one fused gate/up projection; one
// fused backward) and ReLU².
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  return record("swiglu", ops::swiglu(gate, up), {gate, up}, [gate, up](const Tensor& g) {
    ops::SwiGLUGrads d = ops::swiglu_backward(g, gate, up);
    return std::vector<Tensor>{d.dgate, d.dup};
  });
}

Tensor swiglu_packed(const Tensor& gu) {
  return record("swiglu_packed", ops::swiglu_packed(gu), {gu}, [gu](const Tensor& g) {
    return std::vector<Tensor>{ops::swiglu_packed_backward(g, gu)};
  });
}

Tensor relu2(const Tensor& x) {
  return record("relu2", ops::relu2(x), {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{ops::relu2_backward(g, x)};
  });
}

}  // namespace alpha::ag
