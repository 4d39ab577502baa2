#include "spirv/nv2khr.h"

#include "spirv/kernels.h"

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

namespace alpha::spirv {
namespace {

// Opcodes (SPIR-V 1.6 unified grammar; the KHR ones postdate Debian's SPIRV-Headers).
enum Op : uint32_t {
  Undef = 1, Extension = 10, Capability = 17, TypeBool = 20, TypeInt = 21, TypeArray = 28, TypePointer = 32,
  ConstantTrue = 41, ConstantFalse = 42, Constant = 43, ConstantComposite = 44, ConstantNull = 46,
  SpecConstantOp = 52, Function = 54, FunctionParameter = 55, FunctionCall = 57, Variable = 59, Load = 61,
  Store = 62, AccessChain = 65, InBoundsAccessChain = 66, CompositeConstruct = 80, CompositeExtract = 81,
  CompositeInsert = 82, CopyObject = 83, FConvert = 115, Select = 169, Phi = 245,
  TypeCoopNV = 5358, LoadNV = 5359, StoreNV = 5360, MulAddNV = 5361, LengthNV = 5362,
  TypeCoopKHR = 4456, LoadKHR = 4457, StoreKHR = 4458, MulAddKHR = 4459,
};
constexpr uint32_t kCapNV = 5357, kCapKHR = 6022;
enum Use : uint32_t { UseA = 0, UseB = 1, UseAcc = 2 };
const char* use_name(uint32_t u) { return u == UseA ? "A" : u == UseB ? "B" : "accumulator"; }

struct Ins {
  uint32_t op;
  std::vector<uint32_t> a;  // operands after the opcode word
};

// Ops whose first operands are <result type> <result id> and that may carry a matrix-holding type.
const std::set<uint32_t> kTyped = {Undef, ConstantComposite, ConstantNull, FunctionParameter, FunctionCall, Variable,
                                   Load, AccessChain, InBoundsAccessChain, CompositeConstruct, CompositeExtract,
                                   CompositeInsert, CopyObject, FConvert, Select, Phi, LoadNV, MulAddNV};

std::string string_of(const std::vector<uint32_t>& a) {
  std::string s(a.size() * 4, '\0');
  std::memcpy(s.data(), a.data(), s.size());
  return s.substr(0, s.find('\0'));
}
std::vector<uint32_t> words_of(const std::string& s) {
  std::vector<uint32_t> w(s.size() / 4 + 1, 0);
  std::memcpy(w.data(), s.data(), s.size());
  return w;
}

struct UnionFind {
  std::unordered_map<uint32_t, uint32_t> parent;
  uint32_t find(uint32_t x) {
    auto [it, fresh] = parent.emplace(x, x);
    if (fresh || it->second == x) return x;
    return it->second = find(it->second);
  }
  void join(uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[a] = b;
  }
};

}  // namespace

std::vector<uint32_t> nv_to_khr(const std::vector<uint32_t>& words) {
  if (words.size() < 5 || words[0] != 0x07230203u) throw RewriteError("[spirv] not a SPIR-V module");
  std::vector<uint32_t> header(words.begin(), words.begin() + 5);
  std::vector<Ins> ins;
  for (size_t i = 5; i < words.size();) {
    const uint32_t n = words[i] >> 16;
    if (n == 0 || i + n > words.size()) throw RewriteError("[spirv] truncated instruction");
    ins.push_back({words[i] & 0xffffu, std::vector<uint32_t>(words.begin() + i + 1, words.begin() + i + n)});
    i += n;
  }
  auto new_id = [&] { return header[3]++; };

  std::unordered_map<uint32_t, Ins> types;        // matrix, array and pointer types by id
  std::unordered_map<uint32_t, uint32_t> type_of;  // result id -> result type
  uint32_t uint_t = 0;
  std::set<uint32_t> consts_true, consts_false;
  for (const Ins& x : ins) {
    if (x.op == TypeCoopNV || x.op == TypeArray || x.op == TypePointer) types[x.a[0]] = x;
    if (x.op == TypeInt && x.a[1] == 32 && !uint_t) uint_t = x.a[0];
    if (x.op == ConstantTrue) consts_true.insert(x.a[1]);
    if (x.op == ConstantFalse) consts_false.insert(x.a[1]);
    if (kTyped.count(x.op)) type_of[x.a[1]] = x.a[0];
  }
  if (!uint_t) throw RewriteError("[spirv] no 32-bit integer type for the KHR use and layout constants");
  std::function<bool(uint32_t)> holds = [&](uint32_t t) {
    auto it = types.find(t);
    if (it == types.end()) return false;
    const Ins& x = it->second;
    return x.op == TypeCoopNV || holds(x.op == TypeArray ? x.a[1] : x.a[2]);
  };
  auto matrix_id = [&](uint32_t id) { auto it = type_of.find(id); return it != type_of.end() && holds(it->second); };

  // Groups by data flow, then the use each group reaches.
  UnionFind uf;
  std::vector<std::pair<uint32_t, uint32_t>> marks, converts;
  for (const Ins& x : ins) {
    const auto& a = x.a;
    switch (x.op) {
      case Load: if (matrix_id(a[1])) uf.join(a[1], a[2]); break;
      case Store: if (matrix_id(a[1])) uf.join(a[0], a[1]); break;
      case AccessChain: case InBoundsAccessChain: case CopyObject: if (matrix_id(a[1])) uf.join(a[1], a[2]); break;
      case CompositeExtract: if (matrix_id(a[1]) && matrix_id(a[2])) uf.join(a[1], a[2]); break;
      case CompositeInsert: if (matrix_id(a[1])) { uf.join(a[1], a[2]); uf.join(a[1], a[3]); } break;
      case CompositeConstruct: if (matrix_id(a[1])) for (size_t i = 2; i < a.size(); ++i) uf.join(a[1], a[i]); break;
      case Select: if (matrix_id(a[1])) { uf.join(a[1], a[3]); uf.join(a[1], a[4]); } break;
      case Phi: if (matrix_id(a[1])) for (size_t i = 2; i < a.size(); i += 2) uf.join(a[1], a[i]); break;
      case MulAddNV:
        marks.insert(marks.end(), {{a[2], UseA}, {a[3], UseB}, {a[4], UseAcc}, {a[1], UseAcc}});
        uf.join(a[1], a[4]);
        break;
      case FConvert: if (matrix_id(a[1])) converts.push_back({a[1], a[2]}); break;  // may change the use: below
      case LengthNV: throw RewriteError("[spirv] OpCooperativeMatrixLengthNV is not rewritten");
      default: break;
    }
  }
  std::unordered_map<uint32_t, uint32_t> use;  // group root -> use
  for (auto [id, u] : marks) {
    auto [it, fresh] = use.emplace(uf.find(id), u);
    if (!fresh && it->second != u)
      throw RewriteError("[spirv] matrix id " + std::to_string(id) + " is used both as " + use_name(it->second) +
                         " and " + use_name(u) + " (KHR has no conversion between uses)");
  }
  // A matrix that reaches no product (loaded and stored, or converted from an accumulator for its store) is an
  // accumulator; a conversion between uses (an f32 accumulator rounded into an f16 A operand, as attention's
  // probabilities) needs VK_NV_cooperative_matrix2's conversions, declared below.
  auto use_of = [&](uint32_t id) {
    auto it = use.find(uf.find(id));
    return it == use.end() ? static_cast<uint32_t>(UseAcc) : it->second;
  };
  bool conversions = false;
  for (auto [to, from] : converts) conversions |= use_of(to) != use_of(from);

  // The (type, use) pairs needed, down to the matrix types; each gets a new id.
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> split;
  for (auto [id, t] : type_of) {
    if (!holds(t)) continue;
    const uint32_t u = use_of(id);
    for (uint32_t s = t;;) {
      split.emplace(std::make_pair(s, u), 0);
      const Ins& x = types.at(s);
      if (x.op == TypeCoopNV) break;
      s = x.op == TypeArray ? x.a[1] : x.a[2];
    }
  }
  for (auto& [k, v] : split) v = new_id();
  auto retype = [&](uint32_t t, uint32_t u) { return holds(t) ? split.at({t, u}) : t; };
  const uint32_t use_const[3] = {new_id(), new_id(), new_id()}, row_major = new_id(), col_major = new_id();
  std::map<uint32_t, uint32_t> layout;  // colMajor bool id -> layout id (constants or spec-constant selects)
  std::vector<std::pair<uint32_t, uint32_t>> spec_layouts;
  auto layout_of = [&](uint32_t b) {
    if (consts_true.count(b)) return col_major;
    if (consts_false.count(b)) return row_major;
    auto [it, fresh] = layout.emplace(b, 0);
    if (fresh) spec_layouts.push_back({it->second = new_id(), b});
    return it->second;
  };
  for (const Ins& x : ins) {
    if (x.op == LoadNV) layout_of(x.a[4]);
    if (x.op == StoreNV) layout_of(x.a[3]);
  }

  std::vector<Ins> out;
  bool consts_done = false;
  for (const Ins& x : ins) {
    std::vector<uint32_t> a = x.a;
    if (x.op == Capability && a[0] == kCapNV) {
      out.push_back({Capability, {kCapKHR}});
      if (conversions) out.push_back({Capability, {kCapConversionsNV}});
    } else if (x.op == Extension && string_of(a) == "SPV_NV_cooperative_matrix") {
      out.push_back({Extension, words_of("SPV_KHR_cooperative_matrix")});
      if (conversions) out.push_back({Extension, words_of("SPV_NV_cooperative_matrix2")});
    } else if ((x.op == TypeCoopNV || x.op == TypeArray || x.op == TypePointer) && holds(a[0])) {
      if (!consts_done) {  // the use and layout constants, before the first matrix type that needs them
        for (uint32_t u : {UseA, UseB, UseAcc}) out.push_back({Constant, {uint_t, use_const[u], u}});
        out.push_back({Constant, {uint_t, row_major, 0}});
        out.push_back({Constant, {uint_t, col_major, 1}});
        consts_done = true;
      }
      for (uint32_t u : {UseA, UseB, UseAcc}) {
        auto it = split.find({a[0], u});
        if (it == split.end()) continue;
        if (x.op == TypeCoopNV) out.push_back({TypeCoopKHR, {it->second, a[1], a[2], a[3], a[4], use_const[u]}});
        else if (x.op == TypeArray) out.push_back({TypeArray, {it->second, retype(a[1], u), a[2]}});
        else out.push_back({TypePointer, {it->second, a[1], retype(a[2], u)}});
      }
    } else {
      if (x.op == Function && !spec_layouts.empty()) {  // layouts from spec constants, in the global section
        for (auto [id, b] : spec_layouts) out.push_back({SpecConstantOp, {uint_t, id, Select, b, col_major, row_major}});
        spec_layouts.clear();
      }
      if (kTyped.count(x.op) && holds(a[0])) a[0] = retype(a[0], use_of(a[1]));
      if (x.op == LoadNV) {  // type, id, pointer, stride, colMajor, [access] -> type, id, pointer, layout, stride, [access]
        std::vector<uint32_t> k = {a[0], a[1], a[2], layout_of(a[4]), a[3]};
        k.insert(k.end(), a.begin() + 5, a.end());
        out.push_back({LoadKHR, k});
      } else if (x.op == StoreNV) {  // pointer, object, stride, colMajor, [access] -> pointer, object, layout, stride, ...
        std::vector<uint32_t> k = {a[0], a[1], layout_of(a[3]), a[2]};
        k.insert(k.end(), a.begin() + 4, a.end());
        out.push_back({StoreKHR, k});
      } else {
        out.push_back({x.op == MulAddNV ? static_cast<uint32_t>(MulAddKHR) : x.op, a});
      }
    }
  }
  if (!spec_layouts.empty()) throw RewriteError("[spirv] no function to declare the layout constants before");

  // Whatever still names an NV matrix type (an op this rewrite does not know) would be invalid: refuse it.
  std::set<uint32_t> old_types;
  for (auto& [t, x] : types)
    if (holds(t)) old_types.insert(t);
  std::vector<uint32_t> result = header;
  for (const Ins& x : out) {
    if (x.op == TypeCoopNV || x.op == LoadNV || x.op == StoreNV || x.op == MulAddNV)
      throw RewriteError("[spirv] an NV cooperative-matrix instruction was left");
    // a[0] is the result type (or an id) for every op but these few with literal first operands.
    static const std::set<uint32_t> kLiteralFirst = {3, 4, 5, 6, 7, 8, 11, Capability, Extension, 14, 15, 330};
    if (!x.a.empty() && !kLiteralFirst.count(x.op) && old_types.count(x.a[0]))
      throw RewriteError("[spirv] opcode " + std::to_string(x.op) + " has an NV matrix type it does not rewrite");
    if (x.op == TypeArray || x.op == 29 || x.op == TypePointer || x.op == 30 || x.op == 33)  // types built on them
      for (size_t i = 1; i < x.a.size(); ++i)
        if (old_types.count(x.a[i])) throw RewriteError("[spirv] a type still contains an NV matrix type");
    result.push_back(static_cast<uint32_t>((x.a.size() + 1) << 16) | x.op);
    result.insert(result.end(), x.a.begin(), x.a.end());
  }
  return result;
}

}  // namespace alpha::spirv
