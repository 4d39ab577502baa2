// VulkanBackend: alpha::Backend on the Vulkan runtime. Implements the ops for f32 contiguous tensors with
// offset 0 (others are declined: the dispatcher runs the CPU kernel), plus strided copies of any f32/i32 view
// (copy, narrow_backward: vk/copy.cpp) that the dispatcher uses to bring views into that layout on the GPU.
// Method bodies live in the file named like the op: vk/elementwise.cpp, vk/matmul.cpp, vk/softmax.cpp, ...
//
// Size-threshold policy (wants): an op goes to the GPU when its work reaches the class threshold.
// Defaults: 1M elements for element-wise/row ops (config dispatch.threshold), 16M flops for matmul
// (dispatch.matmul_threshold; 2*M*N*K: about a 256x256x128 product). ALPHA_GPU_MIN_WORK=<n> sets every class
// to n (0: everything on the GPU, for tests); it wins over the config.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "vk/nvx.h"
#include "vk/runtime.h"

namespace alpha::ptx {
struct MatmulVariant;  // ptx/kernels.h
}

namespace alpha::vk {

// Matmul kernel policy (vk/matmul.cpp): automatic = coopmat for f16 operands where the device has it, SIMT
// otherwise; simt / coopmat force one (coopmat falls back to SIMT on devices without it). ALPHA_VK_MATMUL.
enum class MatmulMode { automatic, simt, coopmat };
MatmulMode matmul_mode_from_env();
// A block tile of the 16-byte-load f16 coopmat kernel (spirv/matmul_cm.comp; spirv/CMakeLists.txt compiles one
// variant per entry of kCmTiles): name = <bm>x<bn>w<subgroups>k<bk>s<shared stages>[p0][f].
struct CmTile {
  const char* name;
  int64_t bm, bn, bk;
  bool f32out = true;  // has the f32-output variant (split-K partials, weight gradients); else f16 out, whole K
  bool walk = false;   // the walk's band height is a specialization constant (WALK_SC; VulkanBackend::set_cm_walk)
};
std::span<const CmTile> cm_tiles();
std::span<const CmTile> cm_traces();  // per-step clock traces (ALPHA_VK_TILE_TRACE=1)
bool has_bias_variants(const std::string& tile);   // the tile has the bias and residual epilogues
bool has_rowsum_variant(const std::string& tile);  // ... and the bias-gradient row sums (f32 out)
// Timing probes of a tile's inner loop (wrong results by design): only `alpha bench gpu --tiles` runs them.
std::span<const CmTile> cm_probes();
std::span<const CmTile> cm_trials();  // trial tiles (`alpha bench gpu --tiles`), f16 outputs of one K slice only
// ALPHA_VK_CM_TILE=<name> forces one tile for every product (sweeps, tests); empty = chosen per shape.
std::string cm_tile_from_env();
bool cm_only_from_env();  // ALPHA_VK_CM_TILE=coopmat: the coopmat tiles by shape, no PTX variant
bool profile_shapes_from_env();  // ALPHA_VK_PROFILE_SHAPES=1
// The coopmat GEMMs' workgroup walk: column bands of this many tiles (spirv/matmul_cm.comp GROUP_M). The trial twins
// with `walk` take it as a specialization constant: ALPHA_VK_CM_WALK=<tiles> (or set_cm_walk) sets theirs, for sweeps.
constexpr uint32_t kCmWalk = 8;
uint32_t cm_walk_from_env();
// The rows of the single product a batched matmul runs as (vk/matmul.cpp): M nb where a's nb row-major M x lda
// matrices lie back to back (batch stride sa = M lda) against one b (stride sb = 0); 0 otherwise.
int64_t flat_rows(int64_t M, int64_t lda, int64_t nb, int64_t sa, int64_t sb, bool ta);
// ALPHA_VK_SPLIT_TARGET=<workgroups>: the split-K target of coopmat products with f32 outputs; 0 when unset.
int64_t split_target_from_env();
// ALPHA_VK_PTX_MIN_K=<K>: products shorter than K leave the PTX path to the coopmat tiles (A/B runs);
// VulkanBackend::kPtxMinK when unset.
int64_t ptx_min_k_from_env();
// ALPHA_VK_PTX_TN=1: Hopper's TN PTX tiles by shape (=0 or unset: only when forced); anything else is an error.
bool ptx_tn_from_env();
// Attention kernels (vk/attention.cpp), ALPHA_VK_ATTENTION: "auto" = the fastest that applies (tensor-core
// kernels with the softmax in registers, attention_cmr, where the device's accumulator layout is the one they
// are written for; else attention_cm, scores through shared memory; both need f16, head size 64, NV cooperative
// matrix), "cm" = never attention_cmr, "simt" = never tensor cores.
std::string attention_mode_from_env();
// ALPHA_VK_ATTENTION_DQ: attention_cmr's dq from the dS^T its dk/dv kernel stores, "ds" (default: subgroups of 32
// query rows) or "ds16" (16 rows), or by recomputing S and dP, "recompute".
std::string attention_dq_from_env();
// ALPHA_VK_ATTENTION_DKDV_BLOCK: attention_cmr's dk/dv query block, "auto" (default: 64 from 512 queries, else 32),
// "32" or "64"; the same bits either way.
std::string attention_dkdv_block_from_env();

class VulkanBackend : public Backend {
 public:
  explicit VulkanBackend(RuntimeOptions opts = {});
  ~VulkanBackend() override;

  std::string name() const override;
  bool wants(OpClass cls, int64_t work) const override;
  QueueCounters queue_counters() const override;
  std::map<std::string, double> kernel_gpu_ns() const override { return rt_->queue().kernel_ns(); }
  // Per-kernel GPU timestamps (metrics.profile); false when the device's compute queue has no timestamps.
  bool set_profiling(bool on) { return rt_->queue().set_profiling(on); }
  void set_threshold(OpClass cls, int64_t work) { thresholds_[static_cast<size_t>(cls)] = work; }
  // The config's thresholds (dispatch.threshold / dispatch.matmul_threshold) for every class; the environment
  // (ALPHA_GPU_MIN_WORK, ALPHA_VK_CPU_OPS) still wins, as in the constructor.
  void configure_thresholds(int64_t elements, int64_t matmul_flops);
  // Per-class thresholds (a calibration profile, train/loop/calibrate.h) over the current ones, then the environment.
  void configure_class_thresholds(const std::map<OpClass, int64_t>& per_class);
  int64_t threshold(OpClass cls) const { return thresholds_[static_cast<size_t>(cls)]; }
  int class_count() const { return static_cast<int>(thresholds_.size()); }  // OpClass values 0 .. class_count()-1
  Runtime& runtime() { return *rt_; }
  void set_matmul_mode(MatmulMode m) { matmul_mode_ = m; }
  void set_attention_mode(std::string mode);  // auto | cm | simt (ValueError otherwise)
  void set_attention_dq(std::string mode);  // ds | ds16 | recompute (ValueError otherwise)
  void set_attention_dkdv_block(std::string block);  // auto | 32 | 64 (ValueError otherwise)
  // The kernel family fused attention of `dtype`, head size D, runs with: "attention_cmr", "attention_cm" or
  // "attention".
  std::string attention_kernel(DType dtype, int64_t D) const;
  // Whether the device's 16 x 16 f32 cooperative-matrix fragments have the layout attention_cmr.comp assumes
  // (probed once with spirv/coopmat_layout.comp; false without NV cooperative matrices).
  bool coopmat_quad_layout() const;
  // The probe's raw output: per lane of 32, the fragment length, then (row, column) of elements 0..7; empty
  // without NV cooperative matrices.
  std::vector<float> coopmat_layout_probe(bool f16 = false) const;  // f16: a 16 x 16 f16 operand's layout
  // The kernel variant a (batches x) M x N product of `dtype` operands runs with (tests, bench).
  std::string matmul_kernel(DType dtype, int64_t M, int64_t N, int64_t K, int64_t batches) const;
  // The block tile of the 16-byte-load coopmat kernel for a (batches x) M x N x K product (forced or by shape).
  // f32_out: the product leaves in f32 (weight gradients); split over K, the 128 x 128 tile's unstaged f32 partials
  // are slower than the 128 x 64 tile's staged ones.
  const CmTile& cm_tile(int64_t M, int64_t N, int64_t K, int64_t batches, bool f32_out = false) const;
  // Whether cm_tile's choice (not a forced tile) runs the product's whole K where split-K would slice it: f16 outputs
  // of a tall grid of 192 x 128 tiles over a long K (GPT-2's LM head dx).
  bool cm_whole_k(int64_t M, int64_t N, int64_t K, int64_t batches, bool f32_out = false) const;
  // Profile labels per product shape (ALPHA_VK_PROFILE_SHAPES=1): the matmuls' GPU times appear per
  // `kernel[MxKxN TN /splits]` rather than per kernel alone.
  void set_profile_shapes(bool on) { profile_shapes_ = on; }
  // Arrival counters for reductions finished by their last workgroup (counter_window): a ring of kCounters, of
  // which counter_ring_ are used (tests shrink it to reach the path of reductions too wide for it).
  static constexpr uint64_t kCounters = 4096;
  void set_counter_ring(uint64_t n) { counter_ring_ = std::min(std::max<uint64_t>(n, 1), kCounters); }
  // The split-K target of coopmat products with f32 outputs (the weight gradients); 0 = kTargetGroupsCmF32.
  void set_split_target(int64_t groups) { split_target_ = groups; }
  int64_t split_target() const { return split_target_ > 0 ? split_target_ : kTargetGroupsCmF32; }
  void set_concurrent(bool on) override;  // also holds the lazy queue: one submission for the concurrent products
  void set_cm_walk(uint32_t band);  // 0 = kCmWalk; else the walk twins' band height
  uint32_t cm_walk() const { return cm_walk_; }
  // "" = by shape; "coopmat" = by shape among the coopmat tiles only; else a kCmTiles name, or a PTX variant's
  // ("ptx_...", "ptx90_...", ptx/matmul_variants.h: products it fits run it, the rest by shape); throws ValueError
  // otherwise.
  void set_cm_tile(std::string name);
  // The PTX variant (vk/nvx.cpp) a M x N x K product of f16 operands runs, or nullptr (the coopmat tiles run it).
  const ptx::MatmulVariant* ptx_tile(int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool f32_out) const;
  // ptx_tile by shape: grids of at least this many block tiles (about one wave of one block per SM on an H100).
  static constexpr int64_t kPtxMinTiles = 128;
  // ptx_tile by shape: products at least this deep. shakespeare_char's K = 384 products ran as fast alone on either
  // path, but its step 6.71 ms with them on coopmat against 7.01 on PTX (H100, session 58; GPT-2's K >= 768).
  static constexpr int64_t kPtxMinK = 512;
  // K slices of a product of f32 outputs on one of Hopper's tiles (1, 2, 4 or 8; 1 elsewhere): the count of the least
  // estimated time, the partials' extra traffic counted (GPT-2's weight gradients: 36-144 tiles of K 8192).
  int64_t ptx_splits(const ptx::MatmulVariant& v, int64_t M, int64_t N, int64_t K) const;
  // ALPHA_VK_PTX_TN: Hopper's TN tiles (weight gradients) by shape; until the GPU suite has run them, off by default.
  void set_ptx_tn(bool on) { ptx_tn_ = on; }
  int64_t ptx_launches() const { return ptx_launches_; }  // PTX GEMMs recorded so far (tests)
  // The name of what runs a one-matrix product of f16 operands: ptx_tile's variant, else cm_tile's (bench rows).
  std::string matmul_tile_name(int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool f32_out) const;
  // K slices for split-K (1 = none): enough bm x bn workgroups to fill the GPU, slices >= kMinSplitK deep.
  // f32_out: the product leaves in f32 (coopmat: split_target(); else kTargetGroupsCm, each split adding a pass).
  int64_t matmul_splits(const std::string& kernel, int64_t M, int64_t N, int64_t K, int64_t batches,
                        int64_t bm = 128, int64_t bn = 128, bool f32_out = false) const;
  static constexpr int64_t kTargetGroups = 256, kMinSplitK = 256;
  static constexpr int64_t kWholeK = 32768;  // cm_whole_k: the shortest K its tall f16 grids run unsliced
  // Coopmat kernels aim at 768 workgroups: the weight gradients then run 128 x 64 tiles in more K slices. H200
  // steps (targets 256 / 512 / 768 / 1024, alternated twice): shakespeare_char 14.6 / 14.1 / 14.0 / 15.2 ms,
  // GPT-2 59.7 / 59.7 / 59.3 / 62.7 ms (docs/PERFORMANCE.md, session 10).
  static constexpr int64_t kTargetGroupsCm = 768;
  // The weight gradients' (f32 out) target, ALPHA_VK_SPLIT_TARGET's default, while slices keep kMinSlice of K
  // (f16 outputs never cut K shorter).
  // GPT-2 steps on an H200 (targets 768 / 1024 / 1152, alternated twice): 39.7-40.2 / 38.8-39.1 / 38.8-39.0 ms.
  static constexpr int64_t kTargetGroupsCmF32 = 1024, kMinSlice = 2048;
  static constexpr int64_t kSmallGrid = 384;  // cm_tile: fewer 128 x 64 workgroups than this take 64 x 64 tiles
  // Positions per partial sum of the embedding backward (vk/embedding.cpp): a frequent token's run is cut into
  // segments of this many, summed in parallel, then in order.
  static constexpr int32_t kSegment = 32;
  void sync() { rt_->queue().sync(); }

  Tensor add(const Tensor& a, const Tensor& b) override { return binary(0, a, b); }
  Tensor sub(const Tensor& a, const Tensor& b) override { return binary(1, a, b); }
  Tensor mul(const Tensor& a, const Tensor& b) override { return binary(2, a, b); }
  Tensor div(const Tensor& a, const Tensor& b) override { return binary(3, a, b); }
  Tensor unary(const char* op, const Tensor& x) override;
  Tensor scale(const Tensor& x, double mul, double add) override;
  Tensor sum(const Tensor& x, int64_t dim, bool keepdim) override;
  Tensor sum_f32(const Tensor& x, int64_t dim) override;
  Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) override;
  Tensor matmul_f32out(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) override;
  Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) override;  // vk/matmul.cpp: the bias epilogue
  ops::LinearWeightGrads linear_weight_grads(const Tensor& g, const Tensor& x) override;  // vk/matmul.cpp: ROWSUM
  Tensor linear_residual(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) override;  // EPI_RESID
  Tensor embedding(const Tensor& weight, const Tensor& idx) override;
  Tensor embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab, const Tensor& acc) override;
  ops::LayerNormOut layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) override;
  ops::LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                         const Tensor& rstd, bool has_bias, ops::LnGrads which,
                                         const Tensor& acc) override;
  Tensor gelu(const Tensor& x) override;
  Tensor gelu_backward(const Tensor& dy, const Tensor& x) override;
  ops::RMSNormOut rmsnorm(const Tensor& x, const Tensor& w, double eps) override;  // vk/rmsnorm.cpp
  ops::RMSNormGrads rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd) override;
  Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0, bool inverse,
              int64_t rot_heads) override;  // vk/rope.cpp
  Tensor swiglu(const Tensor& gate, const Tensor& up) override;  // vk/swiglu.cpp (with relu2)
  ops::SwiGLUGrads swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up) override;
  Tensor swiglu_packed(const Tensor& gu) override;
  Tensor swiglu_packed_backward(const Tensor& dy, const Tensor& gu) override;
  Tensor relu2(const Tensor& x) override;
  Tensor relu2_backward(const Tensor& dy, const Tensor& x) override;
  Tensor softmax(const Tensor& x, bool causal) override;
  Tensor softmax_backward(const Tensor& dy, const Tensor& y) override;
  ops::CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) override;
  ops::CrossEntropyOut cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                          double dloss) override;
  Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, double dloss,
                                int64_t count, int64_t ignore_index) override;
  Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) override;
  ops::AttentionOut attention(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionParams& ap) override;
  ops::AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& out, const Tensor& lse, const ops::AttentionParams& ap,
                                         bool packed) override;
  Tensor copy(const Tensor& src) override;
  Tensor narrow_backward(const Tensor& g, const Shape& shape, int64_t dim, int64_t start) override;
  Tensor cat(const std::vector<Tensor>& xs, int64_t dim) override;  // vk/copy.cpp
  Tensor cast(const Tensor& x, DType dtype) override;  // vk/cast.cpp

 private:
  // Contiguous `out_shape` gathered from src's view; wdim >= 0: src fills the window at wstart along wdim.
  Tensor strided_copy(const Tensor& src, const Shape& out_shape, int64_t wdim, int64_t wstart);
  // src's view can be read by spirv/copy.comp into an output of out_numel elements (dtype, rank, 32-bit indices).
  bool copyable(const Tensor& src, int64_t out_numel) const;
  // One copy.comp dispatch: src (viewed as `shape`, window wdim/wstart as in strided_copy) into out at ooffset
  // with out's strides. disjoint: no other write since the last barrier touches this window of out (Binding).
  void record_copy(const Tensor& src, const Tensor& out, const Shape& shape, int64_t wdim, int64_t wstart,
                   int64_t ooffset, bool disjoint = false);
  Tensor binary(uint32_t op, const Tensor& a, const Tensor& b);
  Tensor matmul_out(const Tensor& a, const Tensor& b, bool ta, bool tb, DType out_dtype);  // vk/matmul.cpp
  void apply_threshold_env();  // ALPHA_GPU_MIN_WORK, ALPHA_VK_CPU_OPS over thresholds_
  bool f32(const Tensor& t) const { return t.defined() && t.dtype() == DType::f32 && rt_->accepts(t); }
  bool i32(const Tensor& t) const { return t.defined() && t.dtype() == DType::i32 && rt_->accepts(t); }
  // f16 storage (kernels compute in f32; needs the device's 16-bit storage, checked by accepts).
  bool f16(const Tensor& t) const { return t.defined() && t.dtype() == DType::f16 && rt_->accepts(t); }
  // A float tensor some kernel variant stores (f32 or f16); `like` (if defined) must have the same dtype.
  bool flt(const Tensor& t, const Tensor& like = {}) const {
    return (f32(t) || f16(t)) && (!like.defined() || like.dtype() == t.dtype());
  }
  // Kernel variant suffix for a float dtype: "_f16" or "_f32".
  static std::string sfx(const Tensor& t) { return t.dtype() == DType::f16 ? "_f16" : "_f32"; }
  // Row kernels (LayerNorm, RMSNorm): rows of up to 1024 columns run one subgroup-sized workgroup per row (a
  // 128-wide tree over 3-6 elements per invocation was mostly barriers: H100 GPT-2 step, 2.3 ms of LayerNorm);
  // "_vec4" where such a row fits in registers as 8 quads per invocation (the shaders' MAXQ).
  static uint32_t row_wg(int64_t cols) { return cols <= 1024 ? 32 : 128; }
  static const char* row_vec(int64_t cols) { return cols % 4 == 0 && cols <= 4 * 32 * 8 ? "_vec4" : ""; }
  // n elements of a f32 buffer converted into an f16 buffer (or back when to_f16 is false).
  void record_cast(const std::shared_ptr<GpuBuffer>& in, const std::shared_ptr<GpuBuffer>& out, uint32_t n,
                   bool to_f16);
  // Sum of a (outer, n, inner) contiguous buffer times scale, into out (outer * inner floats). Column sums
  // run in chunks of kSumChunk along n (bounded shader loops; more parallel), then sum the chunks.
  static constexpr uint32_t kSumChunk = 4096;
  // Rows per partial sum of a column reduction over `rows` rows of `lanes` invocations each (columns / 4 for the
  // quad kernels): halves from kSumChunk until ~128K invocations run, down to 16 rows for long columns (64 for short
  // ones: a pass over the partials). Counting quads, not columns: 24K invocations of 64 serial loads left a GPT-2
  // bias gradient latency-bound (~50 us for 12 MB on an H200).
  static uint32_t reduce_chunk(uint32_t rows, uint64_t lanes) {
    const uint32_t floor = rows >= 4096 ? 16 : 64;
    uint32_t chunk = kSumChunk;
    while (chunk > floor && lanes * ((rows + chunk - 1) / chunk) < (1u << 17)) chunk /= 2;
    return chunk;
  }
  // in_f16: the input is f16 (the output is always f32).
  Tensor sum_out(const Tensor& x, int64_t dim, bool keepdim, DType out_dtype);
  // vk/matmul.cpp: the single-slice tiles with epilogue variants, and one such product.
  const CmTile* epilogue_tile(int64_t M, int64_t N, int64_t K) const;
  void run_epilogue(const CmTile& ct, const std::string& suffix, int64_t M, int64_t N, int64_t K,
                    std::span<const Binding> bindings);
  // A matmul dispatch's profile label: "" (its kernel's name) unless profile_shapes_.
  std::string shape_label(const std::string& kernel, int64_t M, int64_t K, int64_t N, bool ta, bool tb,
                          int64_t splits) const;
  // out2 (f32 input, inner % 4 == 0, split % 4 == 0): output elements from `split` on go to out2 instead.
  ops::CrossEntropyOut cross_entropy_pass(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                         const double* dloss);
  void record_sum(const std::shared_ptr<GpuBuffer>& in, const std::shared_ptr<GpuBuffer>& out, uint32_t outer,
                  uint32_t n, uint32_t inner, float scale, bool in_f16 = false,
                  const std::shared_ptr<GpuBuffer>& out2 = nullptr, uint32_t split = 0);

  // A window of `count` zeroed arrival counters (kernels that let their last workgroup finish a reduction zero
  // theirs again) in the ring, and its offset.
  std::pair<Binding, uint32_t> counter_window(uint64_t count);

  std::unique_ptr<Runtime> rt_;
  // The PTX matmul path (vk/nvx.cpp): the module, loaded on first use (after rt_: destroyed before the device).
  bool set_ptx_tile(const std::string& name);  // true: name is a PTX variant's (then forced)
  double ptx_rate(const ptx::MatmulVariant& v, int64_t tiles) const;  // ptx_tile's estimate, relative to 1 wave
  double ptx_ns(const ptx::MatmulVariant& v, int64_t M, int64_t N, int64_t K, int64_t splits) const;  // 0: may not
  bool run_ptx_matmul(const ptx::MatmulVariant& v, const std::shared_ptr<GpuBuffer>& a,
                      const std::shared_ptr<GpuBuffer>& b, const std::shared_ptr<GpuBuffer>& out, int64_t M, int64_t N,
                      int64_t K, const std::string& label, const std::shared_ptr<GpuBuffer>& bias = nullptr,
                      const std::shared_ptr<GpuBuffer>& resid = nullptr,
                      int64_t splits = 1);  // false: the driver refused the module
  std::unique_ptr<PtxModule> ptx_[2];  // sm 80, sm 90 (Hopper)
  std::string ptx_tile_;
  bool ptx_failed_[2] = {false, false};  // the driver refused that module: other tiles from then on
  int64_t ptx_launches_ = 0;
  std::shared_ptr<GpuBuffer> counters_;
  uint64_t counter_next_ = 0, counter_ring_ = kCounters;
  std::array<int64_t, 9> thresholds_{};
  MatmulMode matmul_mode_ = matmul_mode_from_env();
  std::string cm_tile_ = cm_tile_from_env();
  bool cm_only_ = cm_only_from_env();
  bool profile_shapes_ = profile_shapes_from_env();
  uint32_t cm_walk_ = cm_walk_from_env();
  int64_t split_target_ = split_target_from_env();
  int64_t ptx_min_k_ = ptx_min_k_from_env();
  bool ptx_tn_ = ptx_tn_from_env();
  bool concurrent_ = false;  // set_concurrent: coopmat f32-out products take whole K on their fastest tile
  // Second passes of concurrent work (LayerNorm's dw/db chunk sums), recorded when the concurrent phase ends: after
  // one barrier for all of them, instead of one per pass between the side-by-side products.
  std::vector<std::function<void()>> after_concurrent_;
  std::string attention_mode_ = attention_mode_from_env();
  std::string attention_dq_ = attention_dq_from_env();
  std::string attention_dkdv_block_ = attention_dkdv_block_from_env();
  mutable int quad_layout_ = -1;  // coopmat_quad_layout(): -1 not probed yet
};

}  // namespace alpha::vk
