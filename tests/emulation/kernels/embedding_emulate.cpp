// kernels/embedding.cu (token embedding lookup and its deterministic
// backward) run on the CPU (emulate_cu.py, kernel_emulation.h) and held to its
// CPU twin, ops::embedding_forward / embedding_backward (src/ops/embedding.*).
//
// Forward: bitwise in f32, f16 and bf16 (one product and one rounding per
// element, as the CPU's), through the 16-byte vector path and the scalar one
// (odd d, a misaligned table or output); an id outside [0, V) must give a row
// of zeros (the CPU op raises there, so its reference is computed with those
// ids replaced and the rows zeroed).
//
// Backward: both ways the kernel sums, the column sum of tables of at most
// kSmallVocab (8) rows (V 2 and 8, one and several slices of 128 rows and
// column tiles) and the radix sort + segmented sum of larger ones (V 9 and
// up), with pad_id skipped, out-of-range ids skipped (left out of the CPU
// reference, which would raise), an id frequent enough to span several
// chunks of 64 sorted entries (the fix-up kernel), segments that begin or end
// exactly on a chunk boundary, mixed dtypes (16-bit dout into an f32 table,
// and f32 dout into a 16-bit table, the kernel's element-wise add_to_row),
// vector and scalar paths. Two kinds of data:
//  - "exact": dout and table are multiples of 1/4 in [-1, 1] and the scale a
//    power of two, so every f32 sum is exact in whatever order it is taken:
//    the result must be the CPU's bits. This holds the kernel's bookkeeping
//    (which rows, which chunk partials, nothing lost or counted twice) to
//    bitwise equality independently of the summation order. (No -0 among
//    them: the kernel adds a +0 sum to rows that only skipped ids touch in
//    the column sum, and its per-segment sums start at +0, which turn a -0
//    into +0 where the CPU keeps it: a difference of sign only.)
//  - "random": uniform floats and a scale such as 0.3. The kernel sums
//    sum(dout) * scale (column sum) or per-chunk sums of dout * scale added
//    to the row, the CPU row += dout * scale one row at a time, so the f32
//    results differ by rounding only: a few ulps of the largest partial sum
//    (at most a few hundred terms of magnitude <= 1), i.e. 2e-6 of
//    max(1, max |ref|) here (measured <= 9e-7). A 16-bit table is rounded
//    once, so those few f32 ulps can move it by one ulp of the 16-bit type:
//    2^-10 (f16) / 2^-7 (bf16) relative, tolerances 1e-3 / 8e-3.
//    Where the order is the same (one slice, or every id in one chunk, with a
//    zero table and a power-of-two scale) the random cases are bitwise too.
// The header promises determinism: every backward runs twice, on a fresh copy
// of the table and a workspace filled once with NaN bytes and once with
// zeros, and the two results must be bitwise equal (this also catches a read
// of a workspace partial that nothing wrote).
// The host compiler does not contract a * b + c into an FMA here (x86-64
// without -mfma), as nvcc would: with the power-of-two scales of the bitwise
// cases the contraction cannot change a bit on the GPU either.
#include "ops/embedding.h"
//
#include "emulate_common.h"
#include "emulated/embedding.inc"

namespace {

using rotor::DType;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

// v rounded to dt and back.
std::vector<float> rounded(const std::vector<float>& v, DType dt) {
  return Tensor::from_floats(v, {static_cast<int64_t>(v.size())}, dt).to_floats();
}

// n multiples of 1/4 in [-1, 1] (sums of a few hundred are exact in f32).
std::vector<float> quarters(size_t n, unsigned seed) {
  std::vector<float> v = randoms(n, seed, -1.0f, 1.0f);
  for (float& x : v) x = std::round(x * 4.0f) / 4.0f + 0.0f;  // no -0
  return v;
}

const char* dname(DType dt) {
  return rotor::dtype_name(dt);
}

// A small deterministic generator for ids and shuffles.
struct Lcg {
  uint32_t s;
  uint32_t next() {
    s = s * 1664525u + 1013904223u;
    return s >> 8;
  }
};

// Ids out of [0, V) that the kernels must treat as zero rows / skip.
int32_t bad_id(int64_t V, uint32_t k) {
  const int32_t bad[] = {-1, static_cast<int32_t>(V), static_cast<int32_t>(V) + 100, 1 << 30,
                         INT32_MIN};
  return bad[k % 5];
}

// ---------------------------------------------------------------- forward

void forward_case(DType dt, int64_t n, int64_t V, int64_t d, float scale, int table_shift,
                  int out_shift, bool with_bad) {
  char what[112];
  std::snprintf(what, sizeof what, "fwd %s n%lld V%lld d%lld shift %d/%d%s", dname(dt),
                static_cast<long long>(n), static_cast<long long>(V), static_cast<long long>(d),
                table_shift, out_shift, with_bad ? " bad ids" : "");
  std::vector<int32_t> ids(static_cast<size_t>(n)), ids_ref(ids.size());
  std::vector<bool> bad(ids.size(), false);
  Lcg g{17u + static_cast<uint32_t>(n)};
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>(g.next() % static_cast<uint32_t>(V));
    if (with_bad && i % 7 == 3) {
      ids[i] = bad_id(V, static_cast<uint32_t>(i));
      bad[i] = true;
    }
    ids_ref[i] = bad[i] ? 0 : ids[i];
  }
  const auto tv = rounded(randoms(static_cast<size_t>(V * d), 11, -2.0f, 2.0f), dt);
  Buf table(dt, V * d, table_shift), out(dt, n * d, out_shift);
  table.set(tv);
  out.fill_nan();
  Tensor out_ref = Tensor::zeros({n, d}, dt);
  rotor::ops::embedding_forward(Tensor::from_ints(ids_ref, {n}),
                                Tensor::from_floats(tv, {V, d}, dt), scale, out_ref);
  std::vector<float> ref = out_ref.to_floats();
  for (size_t i = 0; i < ids.size(); ++i)
    if (bad[i]) std::fill_n(ref.begin() + static_cast<int64_t>(i) * d, d, 0.0f);
  check_status(what, ke::embedding_forward_emulated(ids.data(), n, table.get(), dt, V, d, scale,
                                                    out.get(), nullptr));
  check_bits(what, "out", out.floats(), ref);
}

// ---------------------------------------------------------------- backward

struct Backward {
  DType dout_dt = DType::F32, dt = DType::F32;
  int64_t V = 16, d = 8;
  float scale = 1.0f;
  int pad_id = -1;
  bool exact = true;        // quarters and (the caller's choice) a power-of-two scale
  bool zero_table = false;  // else a random initial gradient
  int dout_shift = 0, table_shift = 0;
  double tol = 0;  // 0: bitwise
};

// The reference: the CPU op on the in-range ids (it raises on the others),
// called with the dtypes it takes (dout's = table's, or 16-bit dout into an
// f32 table); an f32 dout into a 16-bit table, which only the kernel takes,
// is the CPU's f32 sum rounded once to the table's type, as the CPU's own
// 16-bit path does it (detail::F32Compute).
std::vector<float> backward_reference(const Backward& c, const std::vector<int32_t>& ids,
                                      const std::vector<float>& dout,
                                      const std::vector<float>& table) {
  const int64_t d = c.d;
  std::vector<int32_t> ok_ids;
  std::vector<float> ok_rows;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= 0 && ids[i] < c.V) {
      ok_ids.push_back(ids[i]);
      ok_rows.insert(ok_rows.end(), dout.begin() + static_cast<int64_t>(i) * d,
                     dout.begin() + static_cast<int64_t>(i + 1) * d);
    }
  if (ok_ids.empty()) return table;
  const int64_t m = static_cast<int64_t>(ok_ids.size());
  const Tensor ids_t = Tensor::from_ints(ok_ids, {m});
  if (c.dout_dt == c.dt || c.dt == DType::F32) {
    Tensor dtable = Tensor::from_floats(table, {c.V, d}, c.dt);
    rotor::ops::embedding_backward(ids_t, Tensor::from_floats(ok_rows, {m, d}, c.dout_dt), c.scale,
                                   dtable, c.pad_id);
    return dtable.to_floats();
  }
  Tensor dtable = Tensor::from_floats(table, {c.V, d});
  rotor::ops::embedding_backward(ids_t, Tensor::from_floats(ok_rows, {m, d}), c.scale, dtable,
                                 c.pad_id);
  return rounded(dtable.to_floats(), c.dt);
}

void backward_case(const char* label, const Backward& c, const std::vector<int32_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size()), V = c.V, d = c.d;
  char what[112];
  std::snprintf(what, sizeof what, "bwd %s %s->%s n%lld V%lld d%lld", label, dname(c.dout_dt),
                dname(c.dt), static_cast<long long>(n), static_cast<long long>(V),
                static_cast<long long>(d));
  const size_t nd = static_cast<size_t>(n * d), vd = static_cast<size_t>(V * d);
  const auto dout_v = rounded(c.exact ? quarters(nd, 21) : randoms(nd, 21), c.dout_dt);
  const auto table_v = rounded(c.zero_table ? std::vector<float>(vd, 0.0f)
                               : c.exact    ? quarters(vd, 22)
                                            : randoms(vd, 22),
                               c.dt);
  const auto ref = backward_reference(c, ids, dout_v, table_v);

  Buf dout(c.dout_dt, n * d, c.dout_shift);
  dout.set(dout_v);
  const size_t ws_bytes = ke::embedding_backward_workspace_emulated(n, V, d);
  std::vector<float> ws(ws_bytes / sizeof(float) + 64);  // 256-byte aligned below
  char* ws_p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(ws.data()) + 255) & ~255ull);
  std::vector<float> got[2];
  for (int run = 0; run < 2; ++run) {
    Buf dtable(c.dt, V * d, c.table_shift);
    dtable.set(table_v);
    std::memset(ws_p, run == 0 ? 0xff : 0x00, ws_bytes);  // NaNs, then zeros
    const cudaError_t e =
        ke::embedding_backward_emulated(ids.data(), n, dout.get(), c.dout_dt, c.scale, dtable.get(),
                                        c.dt, V, d, c.pad_id, ws_p, ws_bytes, nullptr);
    if (run == 0) check_status(what, e);
    got[run] = dtable.floats();
  }
  if (c.tol == 0)
    check_bits(what, "dtable", got[0], ref);
  else
    check(what, "dtable", rel_err(got[0], ref), c.tol);
  check_bits(what, "rerun", got[1], got[0]);
}

// n ids: a fraction `hot` of them `hot_id`, every 13th pad_id (when >= 0),
// every 11th out of range (when with_bad), the others uniform in [0, V).
std::vector<int32_t> mixed_ids(int64_t n, int64_t V, int hot_id, double hot, int pad_id,
                               bool with_bad, uint32_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  Lcg g{seed};
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t r = g.next();
    if (pad_id >= 0 && i % 13 == 5)
      ids[i] = pad_id;
    else if (with_bad && i % 11 == 7)
      ids[i] = bad_id(V, static_cast<uint32_t>(i / 11));
    else if (static_cast<double>(r % 1000) < hot * 1000)
      ids[i] = hot_id;
    else
      ids[i] = static_cast<int32_t>(g.next() % static_cast<uint32_t>(V));
  }
  return ids;
}

// counts[k] copies of id k (id -1: an out-of-range id), in a shuffled order:
// after the stable sort, id k's segment is the entries [sum of the earlier
// counts, + counts[k]), so the counts place the segment boundaries against
// the chunk boundaries (multiples of 64).
std::vector<int32_t> laid_out_ids(const std::vector<std::pair<int32_t, int>>& counts,
                                  uint32_t seed) {
  std::vector<int32_t> ids;
  for (const auto& [id, k] : counts) ids.insert(ids.end(), static_cast<size_t>(k), id);
  Lcg g{seed};
  for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[g.next() % i]);
  return ids;
}

void backward_cases() {
  const DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
  // ---- the column sum (V <= 8)
  {
    Backward c;  // BERT's token types: 2 rows, 3 slices (128 + 128 + 44 rows), vector path
    c.V = 2, c.d = 64, c.scale = 0.5f;
    backward_case("small exact", c, mixed_ids(300, 2, 1, 0.3, -1, true, 1));
    c.pad_id = 0;  // pad skipped
    backward_case("small exact pad", c, mixed_ids(300, 2, 1, 0.3, 0, true, 2));
    c.V = 8, c.d = 33, c.scale = 2.0f, c.pad_id = 5;  // the largest small table, scalar path
    backward_case("small8 exact scalar pad", c, mixed_ids(260, 8, 3, 0.5, 5, true, 3));
    c.d = 600, c.pad_id = -1;  // several column tiles of 128 vectors: grid.x 2
    backward_case("small8 exact 2 tiles", c, mixed_ids(140, 8, 3, 0.2, -1, false, 4));
    c.d = 130;  // several column tiles, scalar
    backward_case("small8 exact 2 tiles scalar", c, mixed_ids(40, 8, 0, 0.2, -1, true, 5));
    c.d = 64, c.dout_shift = 1;  // whole vectors but a misaligned dout: scalar
    backward_case("small8 exact misaligned", c, mixed_ids(200, 8, 7, 0.1, -1, true, 6));
  }
  for (DType dt : {F16, BF16}) {  // 16-bit dout and table (one rounding of the exact sum)
    Backward c;
    c.dout_dt = c.dt = dt, c.V = 3, c.d = 24, c.scale = 0.25f, c.pad_id = 2;
    backward_case("small exact", c, mixed_ids(270, 3, 1, 0.4, 2, true, 7));
    c.d = 21;
    backward_case("small exact scalar", c, mixed_ids(270, 3, 1, 0.4, 2, true, 8));
  }
  {
    Backward c;  // 16-bit rows into an f32 gradient: vector (needs dtable aligned) and not
    c.dout_dt = BF16, c.V = 4, c.d = 40, c.scale = 1.0f, c.pad_id = 1;
    backward_case("small exact", c, mixed_ids(300, 4, 2, 0.3, 1, true, 9));
    c.table_shift = 1;
    backward_case("small exact tbl misaligned", c, mixed_ids(300, 4, 2, 0.3, 1, true, 10));
    c.dout_dt = F32, c.dt = F16, c.table_shift = 0;  // f32 rows into an f16 gradient
    backward_case("small exact", c, mixed_ids(300, 4, 2, 0.3, 1, true, 11));
  }
  {
    Backward c;  // random data: sums in another order
    c.V = 2, c.d = 64, c.scale = 0.3f, c.exact = false, c.tol = 2e-6;
    backward_case("small random", c, mixed_ids(300, 2, 1, 0.3, -1, true, 12));
    c.dout_dt = c.dt = F16, c.tol = 1e-3;
    backward_case("small random", c, mixed_ids(300, 2, 1, 0.3, -1, true, 13));
    c.dout_dt = c.dt = BF16, c.tol = 8e-3;
    backward_case("small random", c, mixed_ids(300, 2, 1, 0.3, -1, true, 14));
    c.dout_dt = F16, c.dt = F32, c.tol = 2e-6;
    backward_case("small random", c, mixed_ids(300, 2, 1, 0.3, -1, true, 15));
    // One slice, a zero table, a power-of-two scale: the CPU's order, bitwise.
    c.dout_dt = c.dt = F32, c.zero_table = true, c.scale = 0.5f, c.tol = 0;
    backward_case("small random 1 slice", c, mixed_ids(128, 2, 1, 0.3, 0, true, 16));
  }
  // ---- the segmented sum (V >= 9)
  {
    Backward c;
    c.V = 9, c.d = 16, c.scale = 0.5f;  // just past kSmallVocab; one id spans ~4 chunks
    backward_case("large exact hot", c, mixed_ids(400, 9, 4, 0.5, 2, true, 20));
    c.V = 50, c.d = 64, c.pad_id = 7;  // a hot id over most chunks
    backward_case("large exact hot", c, mixed_ids(640, 50, 7 + 1, 0.8, 7, true, 21));
    c.d = 33;  // scalar
    backward_case("large exact hot scalar", c, mixed_ids(333, 50, 3, 0.6, 7, true, 22));
    c.d = 520;  // several column loops per thread (vector: 130 > 128 vectors)
    backward_case("large exact wide", c, mixed_ids(200, 50, 3, 0.5, 7, true, 23));
    c.d = 131;  // several column loops per thread (scalar)
    backward_case("large exact wide scalar", c, mixed_ids(200, 50, 3, 0.5, 7, true, 24));
    c.d = 64, c.dout_shift = 1;  // misaligned dout: scalar
    backward_case("large exact misaligned", c, mixed_ids(300, 50, 3, 0.5, 7, true, 25));
  }
  {
    // Segments placed against the chunk boundaries (64 entries): id 0 ends
    // inside chunk 0, id 1 ends exactly at its end, id 2 fills chunks 1 and 2
    // exactly (begins on a boundary, ends on one), id 3 begins inside chunk 3
    // and goes on to chunk 5, the pad id (4) and bad ids sort last and span
    // chunks 5 and 6 (skipped), id 5 is alone.
    const std::vector<std::pair<int32_t, int>> layout_a = {{0, 40},  {1, 24}, {2, 128}, {5, 1},
                                                           {3, 150}, {4, 70}, {-1, 20}, {12, 3}};
    // Two frequent ids back to back: id 6 from inside chunk 0 over chunks 1
    // and 2 into chunk 3, id 7 from there over chunk 4 to the last entry.
    const std::vector<std::pair<int32_t, int>> layout_b = {{1, 10}, {6, 200}, {7, 110}};
    for (DType dt : {F32, F16, BF16}) {
      Backward c;
      c.dout_dt = c.dt = dt, c.V = 13, c.d = 24, c.scale = 2.0f, c.pad_id = 4;
      backward_case("layout A", c, laid_out_ids(layout_a, 30));
      c.d = 7;
      backward_case("layout A scalar", c, laid_out_ids(layout_a, 31));
      c.d = 24, c.pad_id = -1;
      backward_case("layout B", c, laid_out_ids(layout_b, 32));
    }
    Backward c;  // mixed dtypes through the same layouts
    c.dout_dt = F16, c.dt = F32, c.V = 13, c.d = 24, c.scale = 0.25f, c.pad_id = 4;
    backward_case("layout A", c, laid_out_ids(layout_a, 33));  // vector, add_to_row vectors
    c.table_shift = 1;
    backward_case("layout A tbl misaligned", c, laid_out_ids(layout_a, 34));  // scalar
    c.dout_dt = F32, c.dt = BF16, c.table_shift = 0;
    backward_case("layout A", c, laid_out_ids(layout_a, 35));  // vector, add_to_row scalar
    c.dt = F16, c.pad_id = -1;
    backward_case("layout B", c, laid_out_ids(layout_b, 36));
    c.dout_dt = BF16, c.dt = F32, c.d = 9;
    backward_case("layout B scalar", c, laid_out_ids(layout_b, 37));
  }
  {
    Backward c;  // random data
    c.V = 50, c.d = 64, c.scale = 0.3f, c.exact = false, c.pad_id = 7, c.tol = 2e-6;
    backward_case("large random hot", c, mixed_ids(640, 50, 8, 0.8, 7, true, 40));
    c.dout_dt = c.dt = F16, c.tol = 1e-3;
    backward_case("large random hot", c, mixed_ids(640, 50, 8, 0.8, 7, true, 41));
    c.dout_dt = c.dt = BF16, c.tol = 8e-3;
    backward_case("large random hot", c, mixed_ids(640, 50, 8, 0.8, 7, true, 42));
    c.dout_dt = BF16, c.dt = F32, c.tol = 2e-6;
    backward_case("large random hot", c, mixed_ids(640, 50, 8, 0.8, 7, true, 43));
    // Every id in one chunk (one chunk), a zero table, a power-of-two scale:
    // the CPU's order, bitwise; also with 16-bit rows.
    c.dout_dt = c.dt = F32, c.zero_table = true, c.scale = 0.5f, c.tol = 0;
    backward_case("large random 1 chunk", c, mixed_ids(64, 50, 8, 0.5, 7, true, 44));
    c.dout_dt = c.dt = BF16;
    backward_case("large random 1 chunk", c, mixed_ids(50, 50, 8, 0.5, 7, true, 45));
    // Distinct ids over several chunks: no segment crosses a chunk.
    c.dout_dt = c.dt = F32, c.V = 300, c.pad_id = -1;
    std::vector<int32_t> perm(250);
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>((i * 37) % 300);
    backward_case("large random distinct", c, perm);
  }
  {
    // Edge cases: one row, one column, only pad / bad ids, nothing to do.
    Backward c;
    c.V = 20, c.d = 1;
    backward_case("one column", c, mixed_ids(150, 20, 3, 0.5, 4, true, 50));
    c.V = 2;
    backward_case("small one column", c, mixed_ids(150, 2, 1, 0.5, -1, true, 51));
    c.d = 16, c.V = 20, c.pad_id = 4;
    backward_case("one row", c, {4});  // only the pad id
    backward_case("one row", c, {19});
    backward_case("only bad ids", c, {-1, 20, 4, 1 << 30});
    c.V = 2, c.pad_id = 1;
    backward_case("small only bad ids", c, {-1, 2, 1, 7});
  }
  {
    const char* what = "bwd empty / short workspace";
    int32_t ids[3] = {1, 2, 3};
    float dout[3 * 4] = {}, dtable[20 * 4] = {};
    check_status(what, ke::embedding_backward_emulated(ids, 0, dout, DType::F32, 1.0f, dtable,
                                                       DType::F32, 20, 4, -1, nullptr, 0, nullptr));
    check_true(what, "no ws", ke::embedding_backward_workspace_emulated(0, 20, 4) == 0);
    const size_t need = ke::embedding_backward_workspace_emulated(3, 20, 4);
    std::vector<char> ws(need);
    check_true(
        what, "short ws",
        ke::embedding_backward_emulated(ids, 3, dout, DType::F32, 1.0f, dtable, DType::F32, 20, 4,
                                        -1, ws.data(), need - 1, nullptr) == cudaErrorInvalidValue);
  }
}

void run() {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    forward_case(dt, 40, 30, 64, 8.0f, 0, 0, true);     // vector, 2+ blocks, bad ids
    forward_case(dt, 40, 30, 33, 0.3f, 0, 0, true);     // odd d: scalar
    forward_case(dt, 24, 30, 64, 1.7f, 1, 0, false);    // misaligned table: scalar
    forward_case(dt, 24, 30, 64, 1.0f, 0, 1, true);     // misaligned output: scalar
    forward_case(dt, 1, 5, 1, 2.0f, 0, 0, false);       // one row, one column
    forward_case(dt, 300, 7, 256, 0.125f, 0, 0, true);  // many blocks
  }
  {
    const char* what = "fwd empty";
    float table[4] = {1, 2, 3, 4}, out[4] = {NAN, NAN, NAN, NAN};
    const int32_t ids[1] = {0};
    check_status(
        what, ke::embedding_forward_emulated(ids, 0, table, DType::F32, 1, 4, 1.0f, out, nullptr));
    check_true(what, "untouched", std::isnan(out[0]) && std::isnan(out[3]));
  }
  backward_cases();
}

const Register reg("embedding", run);

}  // namespace
