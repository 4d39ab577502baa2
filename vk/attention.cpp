// Fused attention on the GPU (spirv/attention.comp forward, spirv/attention_bwd.comp backward: row dots, dq,
// dk+dv). q, k, v and dO are read in place through their views (offset + batch/head/row strides, unit stride
// along D), so the head views of a qkv projection need no copies. Block sizes fit the device's shared memory.
// f16 with head size 64 on a device with NV cooperative matrices runs tensor-core kernels instead (the row dots
// stay SIMT), when every view's offset and strides are multiples of 8 halves: spirv/attention_cmr.comp (softmax
// in registers) where the probed fragment layout allows, else spirv/attention_cm.comp.
//
// Dimension legend: B batch, H heads, Tq query rows, Tk keys, D head size.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {

constexpr uint32_t kRowsPerGroup = 64;  // forward / dq: query rows per workgroup (one per invocation)
constexpr uint32_t kMaxHeadDim = 128;
// attention_cm.comp: 4 subgroups of 32, 64 rows (or keys) per workgroup, head size 64; its largest kernel
// (dk/dv) uses 45568 bytes of shared memory.
constexpr uint32_t kCmGroup = 128, kCmRows = 64, kCmHeadDim = 64, kCmShared = 45568;
constexpr int64_t kDkdvLongT = 512;  // query lengths from which dk/dv takes blocks of 64 queries (attention_dkdv_block_from_env)

// (offset, batch, head, row) strides of a (B, H, T, D) view; false when D's stride is not 1 or an index
// the shader forms would not fit 32 bits.
bool view_layout(const Tensor& t, uint32_t out[4]) {
  if (t.strides()[3] != 1) return false;
  int64_t last = t.offset();
  for (int64_t d = 0; d < 4; ++d) {
    if (t.strides()[d] < 0) return false;
    last += (t.size(d) - 1) * t.strides()[d];
  }
  if (last >= int64_t{std::numeric_limits<uint32_t>::max() / 2}) return false;
  out[0] = uint32_t(t.offset());
  for (int d = 0; d < 3; ++d) out[d + 1] = uint32_t(t.strides()[d]);
  return true;
}

pc::AttentionPC attention_pc(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionParams& ap) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2);
  pc::AttentionPC pc{};
  pc.H = uint32_t(H);
  pc.tq = uint32_t(Tq);
  pc.tk = uint32_t(Tk);
  pc.shift = ap.causal ? uint32_t(Tk - Tq) : uint32_t(Tk);
  pc.rows = uint32_t(B * H * Tq);
  // As in vk/dropout.cpp: u32_to_unit(w) >= p <=> (w >> 8) >= ceil(p * 2^24), exactly.
  pc.threshold = ap.p > 0.0 ? uint32_t(std::ceil(ap.p * 16777216.0)) : 0u;
  pc.keep_scale = static_cast<float>(1.0 / (1.0 - ap.p));
  pc.scale = static_cast<float>(ap.scale);
  pc.seed_lo = uint32_t(ap.seed);
  pc.seed_hi = uint32_t(ap.seed >> 32);
  pc.off_lo = uint32_t(ap.offset);
  pc.off_hi = uint32_t(ap.offset >> 32);
  view_layout(q, pc.q);
  view_layout(k, pc.k);
  view_layout(v, pc.v);
  pc.out_row = uint32_t(H * q.size(3));  // separate (B, T, H, D) gradients; packed ones override
  return pc;
}

// Keys per dk/dv workgroup (one per invocation): fewer for wide heads (registers and the padded v rows).
uint32_t attention_key_group(uint32_t D) { return D > 64 ? 32 : 64; }

// Rows staged per shared-memory block: the forward/dq kernels stage k and v (2 * block * D floats), the dk/dv
// kernel the padded v rows plus q and dO blocks. The largest of 32/16/8 that fits; 0 when none does.
uint32_t attention_block(uint64_t limit, uint32_t D, bool dkdv) {
  for (uint32_t blk : {32u, 16u, 8u}) {
    const uint64_t bytes = dkdv ? uint64_t(attention_key_group(D)) * (D + 4) * 4 + 2ull * blk * D * 4 + 2ull * blk * 4
                                : 2ull * blk * D * 4;
    if (bytes <= limit) return blk;
  }
  return 0;
}

// The view itself when the shaders can index it, else a contiguous GPU copy; undefined when neither works.
// f32 or f16 (ops:: makes all of an op's inputs one dtype; f16 runs the _f16 kernels).
Tensor indexable(VulkanBackend& be, Runtime& rt, const Tensor& t) {
  uint32_t l[4];
  if ((t.dtype() != DType::f32 && t.dtype() != DType::f16) || !rt.accepts_storage(t)) return {};
  if (view_layout(t, l)) return t;
  Tensor c = be.copy(t);
  return c.defined() && view_layout(c, l) ? c : Tensor();
}

int64_t pad64(int64_t x) { return (x + 63) / 64 * 64; }

// The tensor-core kernels stage rows with 16-byte loads: offset and strides in multiples of 8 halves.
bool cm_aligned(const uint32_t l[4]) { return l[0] % 8 == 0 && l[1] % 8 == 0 && l[2] % 8 == 0 && l[3] % 8 == 0; }

}  // namespace

// The attention settings' values: `value` when it is one of `choices`, else a ValueError naming the setting
// (`what`: "NAME=" for a variable, "what " for a setter) and them.
static std::string one_of(std::string value, std::string_view what, std::initializer_list<std::string_view> choices) {
  if (std::find(choices.begin(), choices.end(), value) == choices.end())
    throw ValueError(fmt::format("[vk] {}'{}' is not one of {}", what, value, fmt::join(choices, ", ")));
  return value;
}
// An environment variable's setting: `fallback` when unset or empty.
static std::string from_env(const char* var, const char* fallback, std::initializer_list<std::string_view> choices) {
  const char* e = std::getenv(var);
  return one_of(e && *e ? e : fallback, fmt::format("{}=", var), choices);
}

std::string attention_mode_from_env() { return from_env("ALPHA_VK_ATTENTION", "auto", {"auto", "cm", "simt"}); }
std::string attention_dq_from_env() { return from_env("ALPHA_VK_ATTENTION_DQ", "ds", {"ds", "ds16", "recompute"}); }
// The dk/dv kernel's query block (attention_cmr.comp BC): 64 queries per block halve its barriers and give each
// block four independent 16-query products; 32 waste less of the causal diagonal on short sequences (H100,
// backward per layer at B*T 8192: T 1024 0.275 -> 0.259 ms, T 2048 -5%, T 512 even, T 256 0.139 -> 0.145).
std::string attention_dkdv_block_from_env() {
  return from_env("ALPHA_VK_ATTENTION_DKDV_BLOCK", "auto", {"auto", "32", "64"});
}

void VulkanBackend::set_attention_mode(std::string mode) {
  attention_mode_ = one_of(std::move(mode), "attention mode ", {"auto", "cm", "simt"});
}
void VulkanBackend::set_attention_dq(std::string mode) {
  attention_dq_ = one_of(std::move(mode), "attention dq mode ", {"ds", "ds16", "recompute"});
}
void VulkanBackend::set_attention_dkdv_block(std::string block) {
  attention_dkdv_block_ = one_of(std::move(block), "attention dk/dv block ", {"auto", "32", "64"});
}

std::vector<float> VulkanBackend::coopmat_layout_probe(bool f16) const {
  if (!rt_->device().features().nv_coopmat_f16) return {};
  constexpr uint32_t kLanes = 32, kPerLane = 17;  // coopmat_layout.comp: length, then (row, column) x 8
  const auto buf = rt_->scratch(kLanes * kPerLane * 4);
  const struct { uint32_t unused; } push{0};
  rt_->run(f16 ? "coopmat_layout_f16" : "coopmat_layout", {kLanes}, {{buf, true}}, push, {1, 1, 1}, 0.0);
  std::vector<float> got(kLanes * kPerLane);
  rt_->queue().download(buf, got.data(), got.size() * 4);
  return got;
}

// The probe runs the NV kernel; attention_cmr's KHR twins (spirv/nv2khr.h) assume their accumulators keep that layout,
// which test_vk_attention checks against the CPU oracle on the GPU machine (H200, driver 580: they do).
bool VulkanBackend::coopmat_quad_layout() const {
  if (quad_layout_ >= 0) return quad_layout_ == 1;
  const std::vector<float> got = coopmat_layout_probe();
  bool ok = !got.empty();
  for (uint32_t l = 0; ok && l < 32; ++l) {  // attention_cmr.comp's ROW / COL
    const float* g = &got[l * 17];
    ok = g[0] == 8.0f;
    for (uint32_t e = 0; ok && e < 8; ++e)
      ok = g[1 + 2 * e] == float(l / 4 + 8 * (e / 4)) && g[2 + 2 * e] == float(2 * (l % 4) + e % 2 + 8 * ((e / 2) % 2));
  }
  quad_layout_ = ok ? 1 : 0;
  return ok;
}

std::string VulkanBackend::attention_kernel(DType dtype, int64_t D) const {
  const DeviceFeatures& f = rt_->device().features();
  const bool cm = attention_mode_ != "simt" && dtype == DType::f16 && D == kCmHeadDim && f.nv_coopmat_f16 &&
                  f.subgroup_shuffle && f.shared_memory_bytes >= kCmShared;
  if (!cm) return "attention";
  return attention_mode_ == "auto" && coopmat_quad_layout() ? "attention_cmr" : "attention_cm";
}

ops::AttentionOut VulkanBackend::attention(const Tensor& qin, const Tensor& kin, const Tensor& vin,
                                          const ops::AttentionParams& ap) {
  const int64_t B = qin.size(0), H = qin.size(1), Tq = qin.size(2), Tk = kin.size(2), D = qin.size(3);
  if (D % 4 != 0 || D > kMaxHeadDim || 3 * B * H * std::max(Tq, Tk) * D >= int64_t{1} << 31) return {};
  const uint32_t block = attention_block(rt_->device().features().shared_memory_bytes, uint32_t(D), false);
  if (block == 0) return {};
  const Tensor q = indexable(*this, *rt_, qin), k = indexable(*this, *rt_, kin), v = indexable(*this, *rt_, vin);
  if (!q.defined() || !k.defined() || !v.defined()) return {};
  pc::AttentionPC pc = attention_pc(q, k, v, ap);
  Tensor out = rt_->output({B, Tq, H, D}, q.dtype());
  Tensor lse = rt_->output({B, H, Tq});  // f32 for f16 q too (core/ops.h)
  const auto bq = rt_->input_storage(q), bk = rt_->input_storage(k), bv = rt_->input_storage(v);
  const double work = 2.0 * double(B * H * Tq) * double(Tk) * double(D);
  const std::string kernel = attention_kernel(q.dtype(), D);
  if (kernel != "attention" && cm_aligned(pc.q) && cm_aligned(pc.k) && cm_aligned(pc.v)) {
    const uint64_t groups = uint64_t(B * H) * ((Tq + kCmRows - 1) / kCmRows);
    rt_->run(kernel + "_f16", {kCmGroup, uint32_t(D), kCmRows},
             {{bq, false}, {bk, false}, {bv, false}, {Runtime::buffer_of(out), true}, {Runtime::buffer_of(lse), true}},
             pc, Runtime::grid(groups), work);
    return {out.transpose(1, 2), lse};
  }
  const uint64_t groups = uint64_t(B * H) * ((Tq + kRowsPerGroup - 1) / kRowsPerGroup);
  rt_->run("attention" + sfx(q), {kRowsPerGroup, uint32_t(D), block},
           {{bq, false}, {bk, false}, {bv, false}, {Runtime::buffer_of(out), true}, {Runtime::buffer_of(lse), true}},
           pc, Runtime::grid(groups), work);
  return {out.transpose(1, 2), lse};
}

ops::AttentionGrads VulkanBackend::attention_backward(const Tensor& gin, const Tensor& qin, const Tensor& kin,
                                                      const Tensor& vin, const Tensor& oin, const Tensor& lse,
                                                      const ops::AttentionParams& ap, bool packed) {
  const int64_t B = qin.size(0), H = qin.size(1), Tq = qin.size(2), Tk = kin.size(2), D = qin.size(3);
  if (D % 4 != 0 || D > kMaxHeadDim || 3 * B * H * std::max(Tq, Tk) * D >= int64_t{1} << 31 || !f32(lse)) return {};
  const uint32_t block_q = attention_block(rt_->device().features().shared_memory_bytes, uint32_t(D), false), block_k = attention_block(rt_->device().features().shared_memory_bytes, uint32_t(D), true);
  if (block_q == 0 || block_k == 0) return {};
  const Tensor q = indexable(*this, *rt_, qin), k = indexable(*this, *rt_, kin), v = indexable(*this, *rt_, vin);
  const Tensor g = indexable(*this, *rt_, gin), o = indexable(*this, *rt_, oin);
  if (!q.defined() || !k.defined() || !v.defined() || !g.defined() || !o.defined()) return {};
  pc::AttentionPC pc = attention_pc(q, k, v, ap);
  view_layout(g, pc.g);
  const auto bq = rt_->input_storage(q), bk = rt_->input_storage(k), bv = rt_->input_storage(v);
  const auto bg = rt_->input_storage(g), bo = rt_->input_storage(o), bl = rt_->input(lse);
  const double work = 2.0 * double(B * H * Tq) * double(Tk) * double(D);

  // drow_i = rowsum(dO * O): the O view goes through the q slot of a copy of the push constants.
  const auto drow = rt_->scratch(uint64_t(pc.rows) * 4);
  pc::AttentionPC rpc = pc;
  view_layout(o, rpc.q);
  const auto all_of = [&](uint32_t m) {
    return std::all_of(rpc.q, rpc.q + 4, [m](uint32_t x) { return x % m == 0; }) &&
           std::all_of(pc.g, pc.g + 4, [m](uint32_t x) { return x % m == 0; });
  };
  const bool vec4 = all_of(4);  // D % 4 == 0 above
  const bool vec8 = q.dtype() == DType::f16 && D % 8 == 0 && all_of(8);  // 16-byte loads of f16
  rt_->run("attention_rowdot" + sfx(q) + (vec8 ? "_vec8" : vec4 ? "_vec4" : ""), {128, uint32_t(D), 1},
           {{bo, false}, {bg, false}, {drow, true}}, rpc, Runtime::grid_for(pc.rows, 128), double(pc.rows) * double(D));

  ops::AttentionGrads r;
  std::shared_ptr<GpuBuffer> bdq, bdk, bdv;
  if (packed) {  // one (B, T, 3, H, D) buffer, written by both kernels in disjoint places
    r.dqkv = rt_->output({B, Tq, 3 * H * D}, q.dtype());
    bdq = bdk = bdv = Runtime::buffer_of(r.dqkv);
    const Tensor split = r.dqkv.view({B, Tq, 3, H, D});
    r.dq = split.narrow(2, 0, 1).squeeze(2).transpose(1, 2);
    r.dk = split.narrow(2, 1, 1).squeeze(2).transpose(1, 2);
    r.dv = split.narrow(2, 2, 1).squeeze(2).transpose(1, 2);
    pc.out_row = uint32_t(3 * H * D);
    pc.out_off[1] = uint32_t(H * D);
    pc.out_off[2] = uint32_t(2 * H * D);
  } else {
    const DType dt = q.dtype();
    const Tensor dq = rt_->output({B, Tq, H, D}, dt), dk = rt_->output({B, Tk, H, D}, dt), dv = rt_->output({B, Tk, H, D}, dt);
    bdq = Runtime::buffer_of(dq), bdk = Runtime::buffer_of(dk), bdv = Runtime::buffer_of(dv);
    r.dq = dq.transpose(1, 2), r.dk = dk.transpose(1, 2), r.dv = dv.transpose(1, 2);
  }
  const std::string kernel = attention_kernel(q.dtype(), D);
  const bool long_t = attention_dkdv_block_ == "64" || (attention_dkdv_block_ == "auto" && Tq >= kDkdvLongT);
  const std::string dkdv64 = kernel == "attention_cmr" && long_t ? "64" : "";  // the query block of 64
  if (kernel != "attention" && cm_aligned(pc.q) && cm_aligned(pc.k) && cm_aligned(pc.v) &&
      cm_aligned(pc.g)) {  // outputs: out_row and out_off are multiples of D = 64
    const uint64_t qg = uint64_t(B * H) * ((Tq + kCmRows - 1) / kCmRows), kg = uint64_t(B * H) * ((Tk + kCmRows - 1) / kCmRows);
    // dS^T through memory (attention_cmr.comp DQS): dk/dv stores it (f16, the causal part), dq reads it instead of
    // recomputing S and dP: 2 of the backward's 7 products and its exps. H200, GPT-2 shapes: 0.779 -> 0.712 ms/layer.
    // At most 256 MiB of it (GPT-2 124M at B8 T1024: 201 MB): a few layers' scratch can be alive at once while
    // submissions are in flight, and larger shapes would crowd smaller GPUs; they take the recompute below.
    const uint64_t ds_elems = uint64_t(B * H) * uint64_t(pad64(Tq)) * uint64_t(pad64(Tk));
    const uint64_t ds_cap = std::min<uint64_t>(uint64_t{1} << 28, rt_->device().features().max_storage_buffer_range);
    if (kernel == "attention_cmr" && attention_dq_ != "recompute" && 2 * ds_elems <= ds_cap) {  // else the recompute below
      const auto ds = rt_->scratch(ds_elems * 2);
      rt_->run(kernel + "_dqs_dkdv" + dkdv64 + "_f16", {kCmGroup, uint32_t(D), kCmRows},
               {{bq, false}, {bk, false}, {bv, false}, {bg, false}, {bl, false}, {drow, false}, {bdk, true}, {bdv, true},
                {ds, true}},
               pc, Runtime::grid(kg), 3.0 * work);
      // dq: 2 subgroups of 32 query rows (DQ2), each K fragment feeding two products; "ds16": 4 of 16.
      const bool dq2 = attention_dq_ == "ds";
      rt_->run(kernel + (dq2 ? "_dqs_dq2_f16" : "_dqs_dq_f16"), {dq2 ? kCmGroup / 2 : kCmGroup, uint32_t(D), kCmRows},
               {{bq, false}, {bk, false}, {bv, false}, {bg, false}, {bl, false}, {drow, false}, {bdq, true}, {ds, false}},
               pc, Runtime::grid(qg), work);
      return r;
    }
    rt_->run(kernel + "_dq_f16", {kCmGroup, uint32_t(D), kCmRows},
             {{bq, false}, {bk, false}, {bv, false}, {bg, false}, {bl, false}, {drow, false}, {bdq, true}}, pc,
             Runtime::grid(qg), 2.0 * work);
    rt_->run(kernel + "_dkdv" + dkdv64 + "_f16", {kCmGroup, uint32_t(D), kCmRows},
             {{bq, false}, {bk, false}, {bv, false}, {bg, false}, {bl, false}, {drow, false}, {bdk, true}, {bdv, true}},
             pc, Runtime::grid(kg), 3.0 * work);
    return r;
  }
  const uint64_t qgroups = uint64_t(B * H) * ((Tq + kRowsPerGroup - 1) / kRowsPerGroup);
  rt_->run("attention_dq" + sfx(q), {kRowsPerGroup, uint32_t(D), block_q},
           {{bq, false}, {bk, false}, {bv, false}, {bg, false}, {bl, false}, {drow, false},
            {bdq, true}},
           pc, Runtime::grid(qgroups), 2.0 * work);
  const uint32_t kwg = attention_key_group(uint32_t(D));
  const uint64_t kgroups = uint64_t(B * H) * ((Tk + kwg - 1) / kwg);
  rt_->run("attention_dkdv" + sfx(q), {kwg, uint32_t(D), block_k},
           {{bq, false}, {bk, false}, {bv, false}, {bg, false}, {bl, false}, {drow, false},
            {bdk, true}, {bdv, true}},
           pc, Runtime::grid(kgroups), 3.0 * work);
  return r;
}

}  // namespace alpha::vk
