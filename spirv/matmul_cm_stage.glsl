// Staging of matmul_cm.comp's A and B slices (included there after the shared slices As, Bs are declared; uses its
// tile macros, push constants and operand buffers): which invocation stages which 16-byte piece, the checked loads
// (zeros outside the matrices), the in-K loads of whole K steps, and the stores into shared memory.
// Staging pattern: consecutive invocations take consecutive addresses of the operand's memory (V halves each).
// t and e stay split: indexing (t + e NT) / R raised the 128x64 p0 tile from 205 to 255 registers (up to 30% slower).
void slot(uint t, uint e, uint R, bool k_contig, out uint r, out uint k) {
  if (k_contig) { k = (t % (BK / V)) * V; r = t / (BK / V) + e * (NT / (BK / V)); }
  else if (NT % (R / V) == 0) { r = (t % (R / V)) * V;  k = t / (R / V) + e * (NT / (R / V)); }
  else { const uint i = t + e * NT; r = (i % (R / V)) * V; k = i / (R / V); }  // R = 96 (rows of 12 pieces)
}
// Shared offset of element (r, k) of a slice stored along k (row-major) or along r.
uint soff(uint r, uint k, uint R, bool k_contig) { return k_contig ? r * (BK + PAD) + k : k * (R + PAD) + r; }

// One staged element of step k0's A / B slice (zero outside the matrix; VEC8: a whole vector is in or out of range,
// since M, N, K and kend are multiples of 8), and its store into shared buffer st.
EL load_a(uint t, uint e, uint k0, uint kend, uint m0, uint abase) {
  uint r, k;
  slot(t, e, BM, !TRANS_A, r, k);
  const uint m = m0 + r, ka = k0 + k;
  return (m < p.M && ka < kend) ? EL(a[(abase + (TRANS_A ? ka * p.lda + m : m * p.lda + ka)) / V]) : EL(0);
}
EL load_b(uint t, uint e, uint k0, uint kend, uint n0, uint bbase) {
  uint r, k;
  slot(t, e, BN, TRANS_B, r, k);
  const uint n = n0 + r, kb = k0 + k;
  return (n < p.N && kb < kend) ? EL(b[(bbase + (TRANS_B ? n * p.ldb + kb : kb * p.ldb + n)) / V]) : EL(0);
}
void store_a(uint t, uint e, uint st, EL v) {
  uint r, k;
  slot(t, e, BM, !TRANS_A, r, k);
  As[(st * STAGE_A + soff(r, k, BM, !TRANS_A)) / V] = v;
}
void store_b(uint t, uint e, uint st, EL v) {
  uint r, k;
  slot(t, e, BN, TRANS_B, r, k);
  Bs[(st * STAGE_B + soff(r, k, BN, TRANS_B)) / V] = v;
}
// In-K twins for steps wholly inside K (no compare or select per staged piece): rows past M (columns past N) read
// the last ones in range instead (whole vectors: M and N are multiples of V), so the loads stay inside the operands;
// their products only reach accumulators of rows or columns the epilogues never store (every store is bounds-checked).
EL load_a_in(uint t, uint e, uint k0, uint m0, uint abase) {
  uint r, k;
  slot(t, e, BM, !TRANS_A, r, k);
  const uint m = min(m0 + r, p.M - (TRANS_A ? V : 1u)), ka = k0 + k;
  return EL(a[(abase + (TRANS_A ? ka * p.lda + m : m * p.lda + ka)) / V]);
}
EL load_b_in(uint t, uint e, uint k0, uint n0, uint bbase) {
  uint r, k;
  slot(t, e, BN, TRANS_B, r, k);
  const uint n = min(n0 + r, p.N - (TRANS_B ? 1u : V)), kb = k0 + k;
  return EL(b[(bbase + (TRANS_B ? n * p.ldb + kb : kb * p.ldb + n)) / V]);
}
#define LOAD_A(k0, e) load_a(t, e, k0, kend, m0, abase)
#define LOAD_A_IN(k0, e) load_a_in(t, e, k0, m0, abase)
#define LOAD_B_IN(k0, e) load_b_in(t, e, k0, n0, bbase)
#define LOAD_B(k0, e) load_b(t, e, k0, kend, n0, bbase)
#define STORE_A(st, e, v) store_a(t, e, st, v)
#define STORE_B(st, e, v) store_b(t, e, st, v)
