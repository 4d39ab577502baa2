// ALPHA_VK_CHECK=1 (a debugging mode of the dispatcher, core/ops.cpp): every op that ran on the GPU is run again
// on the CPU and compared with a per-op-class tolerance; the first difference throws GpuCheckError naming the
// op, the output, the element and the input shapes. Internal to core/: the dispatcher calls these.
#pragma once
#include <initializer_list>

#include "core/backend.h"
#include "core/ops.h"

namespace alpha::ops::gpu_check {

struct CheckState {
  bool on = false;            // ALPHA_VK_CHECK set (and not "0") at start-up, or set_gpu_check()
  bool corrupt_next = false;  // test hook: corrupt the next GPU result before it is compared
};
CheckState& check_state();

// Compare a GPU result with the CPU's, output by output; throws GpuCheckError on the first mismatch.
void check_result(const char* op, OpClass cls, const Tensor& g, const Tensor& c, std::initializer_list<Tensor> in);
void check_result(const char* op, OpClass cls, const LayerNormOut& g, const LayerNormOut& c, std::initializer_list<Tensor> in);
void check_result(const char* op, OpClass cls, const LayerNormGrads& g, const LayerNormGrads& c, std::initializer_list<Tensor> in);
void check_result(const char* op, OpClass cls, const CrossEntropyOut& g, const CrossEntropyOut& c, std::initializer_list<Tensor> in);
void check_result(const char* op, OpClass cls, const AttentionOut& g, const AttentionOut& c, std::initializer_list<Tensor> in);
void check_result(const char* op, OpClass cls, const RMSNormOut& g, const RMSNormOut& c, std::initializer_list<Tensor> in);
void check_result(const char* op, OpClass cls, const RMSNormGrads& g, const RMSNormGrads& c, std::initializer_list<Tensor> in);
void check_result(const char* op, OpClass cls, const SwiGLUGrads& g, const SwiGLUGrads& c, std::initializer_list<Tensor> in);
void check_result(const char* op, OpClass cls, const AttentionGrads& g, const AttentionGrads& c, std::initializer_list<Tensor> in);

// Test hook: adds 1 to the first element of a GPU result (its first tensor) before the check compares.
void corrupt(Tensor t);

}  // namespace alpha::ops::gpu_check
