// Unicode code point classes and GPT-2's regex pre-tokenizer, on raw bytes. The class tables are generated from
// Node's regex engine (tests/gpt2/make_unicode_tables.js) so `\p{L}`, `\p{N}` and `\s` agree with the JS reference.
// Invalid UTF-8 bytes are one "other" character each, so arbitrary bytes pass through losslessly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace alpha {

enum class CpClass : uint8_t { other = 0, letter = 1, number = 2, space = 3, mark = 4 };

namespace unicode_detail {
struct ClassRange {
  uint32_t lo, hi;
  uint8_t cls;
};
extern const ClassRange kClassRanges[];
extern const size_t kNumClassRanges;
extern const char* const kUnicodeVersion;
extern const uint8_t* const kBmpClass;  // 65536 entries, built from kClassRanges at startup
CpClass astral_class(uint32_t cp);      // binary search for cp >= 0x10000
}  // namespace unicode_detail

inline CpClass cp_class(uint32_t cp) {
  return cp < 0x10000 ? static_cast<CpClass>(unicode_detail::kBmpClass[cp]) : unicode_detail::astral_class(cp);
}

// One decoded character: its code point (0xFFFD for an invalid byte), byte length and class.
struct CpInfo {
  uint32_t cp;
  uint32_t len;
  CpClass cls;
};

inline CpInfo cp_at(const unsigned char* p, size_t n, size_t i) {
  const unsigned char c = p[i];
  if (c < 0x80) return {c, 1, static_cast<CpClass>(unicode_detail::kBmpClass[c])};
  const uint32_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > n) return {0xfffd, 1, CpClass::other};
  uint32_t cp = len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
  for (uint32_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xc0) != 0x80) return {0xfffd, 1, CpClass::other};
    cp = (cp << 6) | (p[i + k] & 0x3fu);
  }
  // Overlong forms, surrogates and > U+10FFFF are invalid UTF-8 (the JS reference never sees them): raw bytes.
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return {0xfffd, 1, CpClass::other};
  return {cp, len, cp_class(cp)};
}

// Splits `s` like GPT-2's pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (JS semantics, alternatives tried in order) and calls emit(begin, end) with byte offsets of each piece.
template <class Emit>
void gpt2_pretokenize(std::string_view s, Emit&& emit) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  // Marks are neither \p{L} nor \p{N} nor \s, so for this pattern they are "other".
  auto group = [](CpClass c) { return c == CpClass::mark ? CpClass::other : c; };
  auto run_end = [&](size_t j, CpClass cls) {  // end of the run of characters of class `cls` starting at j
    while (j < n) {
      const CpInfo ci = cp_at(p, n, j);
      if (group(ci.cls) != cls) break;
      j += ci.len;
    }
    return j;
  };
  size_t i = 0;
  while (i < n) {
    if (p[i] == '\'' && i + 1 < n) {
      const unsigned char a = p[i + 1], b = i + 2 < n ? p[i + 2] : 0;
      size_t len = (a == 's' || a == 't' || a == 'm' || a == 'd') ? 2
                   : ((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
      if (len) {
        emit(i, i + len);
        i += len;
        continue;
      }
    }
    const CpInfo c0 = cp_at(p, n, i);
    const CpClass g0 = group(c0.cls);
    if (g0 != CpClass::space) {  // \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
      const size_t j = run_end(i, g0);
      emit(i, j);
      i = j;
      continue;
    }
    if (c0.cp == ' ' && i + 1 < n) {  // " ?" then a non-space run
      const CpClass g1 = group(cp_at(p, n, i + 1).cls);
      if (g1 != CpClass::space) {
        const size_t j = run_end(i + 1, g1);
        emit(i, j);
        i = j;
        continue;
      }
    }
    // \s+(?!\S): the whole run at the end of text, else all but its last character (which then joins the next
    // piece as " ?X" or stands alone); a single whitespace character before a non-space falls to \s+.
    size_t j = i, last = i, count = 0;
    while (j < n) {
      const CpInfo ci = cp_at(p, n, j);
      if (ci.cls != CpClass::space) break;
      last = j;
      j += ci.len;
      ++count;
    }
    const size_t end = (j == n || count == 1) ? j : last;
    emit(i, end);
    i = end;
  }
}

}  // namespace alpha
