// KsPlan: argument checks, the solver table (kernels, cuBLAS, streaming or transpositions +
// cuBLAS) and dtype dispatch for the ks family.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <optional>
#include <string>

#include "cuda/check.hpp"
#include "cuda/ks/ks_blas.hpp"
#include "cuda/ks/ks_dense.hpp"
#include "cuda/ks/ks_small.hpp"
#include "cuda/ks/ks_stream.hpp"
#include "cuda/ks/ks_tr.hpp"
#include "strux/core.hpp"
#include "strux/cuda/ks.hpp"

namespace strux::cuda {
namespace ks {
template <class T>
void launch_prod(const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, int64_t, int64_t, bool, int, cudaStream_t);
template <class T>
void launch_gradw(const T*, const T*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                  cudaStream_t);
}  // namespace ks

namespace {
// The ks solver table, in ONE place (like FFTW's dft/conf.c): for each operation an ordered list
// of {path, applicable(problem), preferred(problem)}; the plan takes the first entry that is
// applicable and preferred. A forced path (KsOptions::path) takes the first entry of that path
// that is applicable. The measurements behind each rule: bench/NOTES-gpu-ks-scan.md#ks-path-rule
// (products) and #ks-dw-rule (backward_w).
struct Problem {
  int64_t a, b, c, d, batch;  // the product's pattern (backward_x asks with (a, c, b, d))
  bool bl, f32, dx;
  int64_t es;        // element bytes
  ks::StreamCfg sc;  // the streaming kernel's tile (float32 batch-last only; else not ok)
};

struct Solver {
  KsPath path;
  bool (*applicable)(const Problem&);
  bool (*preferred)(const Problem&);
};

bool always(const Problem&) { return true; }
bool never(const Problem&) { return false; }
bool stream_size(const Problem& q) { return q.b >= 32 && q.c >= 32 && q.b * q.c <= 96 * 96; }
bool big_group(const Problem& q) { return q.a * q.d == 1 && q.b * q.c >= (int64_t(1) << 19); }
// tr (batch-first d > 1) from batch 1024 wherever its row segments fit the opt-in shared memory
// (bench/NOTES-gpu-ks-scan.md "ks-path-rule"), except segments over 48 KB of tiny blocks
// (min(b, c) < 4): on the H100 (2026-11-28) tr beat the kernels on every large-segment row but
// (1,2,4,7168) (0.32x), where the GEMM is a sliver. backward_w's kernel is FFMA + atomics in every
// dtype ("ks-dw-rule"): the same bound.
constexpr int64_t kTrSmallSeg = 48 * 1024;
template <bool kDw>
bool tr_rule(const Problem& q) {
  return q.batch >= 1024 &&
         (ks::tr_seg_bytes(q.b, q.c, q.d, q.es, kDw) <= kTrSmallSeg || std::min(q.b, q.c) >= 4);
}
// Small batches, batch-first forwards, where the path measured faster than the default per
// factor on the H200 and again on the H100 (bench/NOTES-gpu-ks-small.md): float32 up to batch 8,
// and up to 64 where d > 1 (a d == 1 factor's cuBLAS default wins at 64); halves at batch 1, but
// not a d == 1 factor of over 2^17 weights (a*b*c) (cuBLAS GemmEx, 0.87-0.88x there). dx and batch-last
// are not measured against the default: forced only.
bool small_batch(const Problem& q) {
  if (q.bl || q.dx) return false;
  if (q.f32) return q.batch <= (q.d > 1 ? 64 : 8);
  return q.batch == 1 && (q.d > 1 || q.a * q.b * q.c <= (int64_t(1) << 17));
}

const Solver kProducts[] = {
    // small batches: weights read once per register tile of batch rows
    // (bench/NOTES-gpu-ks-small.md)
    {KsPath::small,
     [](const Problem& q) { return ks::small_applies(q.a, q.b, q.c, q.d, q.batch); },
     small_batch},
    // batch-last float32 groups whose W fits the streaming kernel with its 128-column tile
    {KsPath::stream, [](const Problem& q) { return q.bl && q.f32 && q.sc.ok(); },
     [](const Problem& q) { return q.sc.tn == 128 && stream_size(q); }},
    // dx of a stream-sized group that gets only a narrower tile
    {KsPath::kernels, always,
     [](const Problem& q) { return q.dx && q.bl && stream_size(q) && q.sc.ok(); }},
    // cuBLAS on strided views: halves, dx, and batch-last forwards but one big group
    {KsPath::blas,
     [](const Problem& q) { return ks::blas_applies(q.a, q.b, q.c, q.d, q.batch, q.bl); },
     [](const Problem& q) { return !q.f32 || q.dx || (q.bl && !big_group(q)); }},
    // batch-first d > 1: in-row transpositions around cuBLAS (segments up to the opt-in smem)
    {KsPath::tr,
     [](const Problem& q) {
       return ks::tr_applies(q.a, q.b, q.c, q.d, q.batch, q.bl, q.es, false);
     },
     tr_rule<false>},
    {KsPath::kernels, always, always},
    // Forced only (after the last default entry, so the default never reaches it): W expanded
    // into the dense K, one cuBLAS GEMM (ks_dense.cu; bench/NOTES-gpu-ks-scan.md "ks-dense");
    // forward and dx alike (applicability is symmetric in b and c).
    {KsPath::dense,
     [](const Problem& q) { return ks::dense_applies(q.a, q.b, q.c, q.d, q.batch); }, never},
};

// (no dense entry: a dense dK costs a*d times the FLOPs and throws away a*d - 1 zero blocks)
const Solver kBackwardW[] = {
    {KsPath::blas,
     [](const Problem& q) { return ks::blas_applies(q.a, q.b, q.c, q.d, q.batch, q.bl); }, always},
    {KsPath::tr,
     [](const Problem& q) {
       return ks::tr_applies(q.a, q.b, q.c, q.d, q.batch, q.bl, q.es, true);
     },
     tr_rule<true>},
    {KsPath::kernels, always, always},
};

// The table's entry for q, or the forced path where it applies (nullopt where it does not).
template <size_t N>
std::optional<KsPath> choose(const Solver (&table)[N], const Problem& q,
                             std::optional<KsPath> force) {
  for (const Solver& s : table)
    if (force ? s.path == *force && s.applicable(q) : s.applicable(q) && s.preferred(q))
      return s.path;
  return std::nullopt;
}

KsPlan::Choice product_choice(const Problem& q, std::optional<KsPath> force, bool* forced_ok) {
  std::optional<KsPath> p = force ? choose(kProducts, q, force) : std::nullopt;
  if (p) *forced_ok = true;
  else p = choose(kProducts, q, std::nullopt);
  if (*p == KsPath::stream) return {KsPath::stream, q.sc.tn, q.sc.stages, q.sc.mt};
  return {*p, 0, 0, 0};
}
}  // namespace

const char* ks_path_name(KsPath p) {
  switch (p) {
    case KsPath::blas: return "blas";
    case KsPath::stream: return "stream";
    case KsPath::tr: return "tr";
    case KsPath::small: return "small";
    case KsPath::dense: return "dense";
    default: return "kernels";
  }
}

std::string KsPlan::describe() const {
  auto product = [this](const Choice& c) {
    std::string s = ks_path_name(c.path);
    if (c.path == KsPath::stream)
      s += " (tile " + std::to_string(c.tn) + " x " + std::to_string(c.stages) + ", mt " +
           std::to_string(c.mt) + ")";
    if (c.path == KsPath::dense)
      s += " (K " + std::to_string(p_.a * p_.b * p_.d) + " x " +
           std::to_string(p_.a * p_.c * p_.d) + ")";
    return s;
  };
  std::string s = "ks (" + std::to_string(p_.a) + ", " + std::to_string(p_.b) + ", " +
                  std::to_string(p_.c) + ", " + std::to_string(p_.d) + ") batch " +
                  std::to_string(batch_) + (batch_last_ ? " bsl " : " bsf ") + dtype_name(dtype_) +
                  ": forward " + product(fwd_) + ", backward_x " + product(bx_) +
                  ", backward_w " + ks_path_name(dw_path_);
  if (dw_chunk_) s += " (chunk " + std::to_string(dw_chunk_) + (dw_ptrs_ ? ", pointer array)" : ", host loop)");
  if (tc_variant_ >= 0) s += ", tensor-core variant " + std::to_string(tc_variant_);
  return s;
}

KsPlan::KsPlan(KsPattern p, int64_t batch, bool batch_last, DType dtype, const KsOptions& opt)
    : p_(p), batch_(batch), batch_last_(batch_last), dtype_(dtype) {
  check_positive(p.a, "a");
  check_positive(p.b, "b");
  check_positive(p.c, "c");
  check_positive(p.d, "d");
  check_positive(batch, "batch");
  check_arg(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16, "dtype",
            "expected float32, float16 or bfloat16, got ", dtype_name(dtype));
  check_arg(opt.stream_tn == 0 || opt.stream_tn == 32 || opt.stream_tn == 64 || opt.stream_tn == 128,
            "stream_tn", "expected 0 (automatic), 32, 64 or 128, got ", opt.stream_tn);
  check_arg(opt.stream_mt >= 0 && opt.stream_mt <= 2, "stream_mt",
            "expected 0 (automatic), 1 or 2, got ", opt.stream_mt);
  check_arg(opt.tc_variant >= -1 && opt.tc_variant <= 1, "tc_variant",
            "expected -1 (automatic), 0 or 1, got ", opt.tc_variant);
  // Tile counts go to gridDim.x (< 2^31): generous for any batch that fits in memory.
  check_arg(batch / 128 + 1 < (int64_t(1) << 31), "batch", "too large: ", batch);
  const bool f32 = dtype == DType::f32;
  auto problem = [&](int64_t b, int64_t c, bool dx) {
    const ks::StreamCfg sc = batch_last && f32 ? ks::stream_pick(b, c, opt.stream_tn, opt.stream_mt)
                                               : ks::StreamCfg{};
    return Problem{p.a, b, c, p.d, batch, batch_last, f32, dx, int64_t(ks::elem_bytes(dtype)), sc};
  };
  // A forced dense path that cannot run says why (the generic message below names no limit).
  if (opt.path == KsPath::dense)
    check_arg(ks::dense_applies(p.a, p.b, p.c, p.d, batch), "path",
              "forced 'dense' expected a dense K (a*b*d x a*c*d) of at most 2^28 elements and "
              "batch < 2^31, got pattern (", p.a, ", ", p.b, ", ", p.c, ", ", p.d, "), batch ",
              batch);
  bool forced_ok = false;
  fwd_ = product_choice(problem(p.b, p.c, false), opt.path, &forced_ok);
  bx_ = product_choice(problem(p.c, p.b, true), opt.path, &forced_ok);
  const int64_t es = int64_t(ks::elem_bytes(dtype));
  const bool trf = fwd_.path == KsPath::tr, trb = bx_.path == KsPath::tr;
  if (trf || trb)
    tr_rows_ = ks::tr_reserve(p.a * std::max(trf ? p.c : 0, trb ? p.b : 0) * p.d * es, batch);
  const Problem qw = problem(p.b, p.c, false);
  std::optional<KsPath> dw = opt.path ? choose(kBackwardW, qw, opt.path) : std::nullopt;
  forced_ok = forced_ok || dw.has_value();
  dw_path_ = dw ? *dw : *choose(kBackwardW, qw, std::nullopt);
  if (opt.path && !forced_ok)
    check_arg(false, "path", "the forced path '", ks_path_name(*opt.path),
              "' applies to no operation of pattern (", p.a, ", ", p.b, ", ", p.c, ", ", p.d,
              "), batch ", batch, ", layout ", batch_last ? "bsl" : "bsf", ", dtype ",
              dtype_name(dtype));
  tc_variant_ = opt.tc_variant;
  // the rows of one dw GEMM batch: the whole batch, or one pass of the transposed copies
  int64_t dw_batch = batch;
  if (dw_path_ == KsPath::tr)
    dw_batch = dw_rows_ = ks::tr_reserve(p.a * (p.b + p.c) * p.d * es, batch);
  if (dw_path_ != KsPath::kernels) {
    dw_chunk_ = ks::blas_dw_chunk(p.a, p.b, p.c, p.d, dw_batch, dtype);
    dw_ptrs_ = opt.dw_ptrs;
  }
  // Buffers for the cuBLAS paths, grown here so that no call allocates.
  const int64_t abcd = p.a * p.b * p.c * p.d;
  const bool wbuf = fwd_.path == KsPath::blas || bx_.path == KsPath::blas ||
                    fwd_.path == KsPath::tr || bx_.path == KsPath::tr;
  int64_t w_bytes = wbuf ? abcd * int64_t(ks::elem_bytes(dtype)) : 0;
  if (fwd_.path == KsPath::dense || bx_.path == KsPath::dense)  // one K serves both
    w_bytes = std::max(w_bytes, ks::dense_bytes(p.a, p.b, p.c, p.d, es));
  const int64_t dw_floats =
      dw_chunk_ ? ks::blas_dw_floats(p.a, p.b, p.c, p.d, dw_batch, dw_chunk_) : 0;
  if (w_bytes || dw_floats) ks::blas_reserve(w_bytes, dw_floats);
}

namespace {
template <class F>
void by_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default: throw TypeError("ks: unsupported dtype");
  }
}
}  // namespace

void KsPlan::forward(const void* x, const void* w, void* y, void* stream) const {
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d;
  if (fwd_.path == KsPath::stream)
    return ks::stream_prod(static_cast<const float*>(x), static_cast<const float*>(w),
                           static_cast<float*>(y), a, b, c, d, batch_, b * c * d, c * d, d, 1,
                           ks::StreamCfg{fwd_.tn, fwd_.stages, fwd_.mt},
                           static_cast<cudaStream_t>(stream));
  if (fwd_.path == KsPath::blas) {
    ks::blas_prod(x, w, y, dtype_, a, b, c, d, batch_, b * c * d, c * d, d, 1, batch_last_,
                  static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  if (fwd_.path == KsPath::dense) {
    ks::dense_prod(x, w, y, dtype_, a, b, c, d, batch_, batch_last_, false,
                   static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  if (fwd_.path == KsPath::tr) {
    ks::tr_prod(x, w, y, dtype_, a, b, c, d, batch_, b * c * d, c * d, d, 1, tr_rows_,
                static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    if (fwd_.path == KsPath::small)
      return ks::small_prod<T>(static_cast<const T*>(x), static_cast<const T*>(w),
                               static_cast<T*>(y), a, b, c, d, batch_, b * c * d, c * d, d, 1,
                               batch_last_, static_cast<cudaStream_t>(stream));
    ks::launch_prod<T>(static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), a,
                       b, c, d, batch_, b * c * d, c * d, d, 1, batch_last_, tc_variant_,
                       static_cast<cudaStream_t>(stream));
  });
}

void KsPlan::backward_x(const void* dy, const void* w, void* dx, void* stream) const {
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d;
  // Pattern (a, c, b, d) whose weight (i, k', l', j) is w[i, l', k', j]: the same kernel with
  // the middle strides of w swapped.
  if (bx_.path == KsPath::stream)
    return ks::stream_prod(static_cast<const float*>(dy), static_cast<const float*>(w),
                           static_cast<float*>(dx), a, c, b, d, batch_, b * c * d, d, c * d, 1,
                           ks::StreamCfg{bx_.tn, bx_.stages, bx_.mt},
                           static_cast<cudaStream_t>(stream));
  if (bx_.path == KsPath::blas) {
    ks::blas_prod(dy, w, dx, dtype_, a, c, b, d, batch_, b * c * d, d, c * d, 1, batch_last_,
                  static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  if (bx_.path == KsPath::dense) {  // dx = dy K: the same K, the other GEMM operand order
    ks::dense_prod(dy, w, dx, dtype_, a, b, c, d, batch_, batch_last_, true,
                   static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  if (bx_.path == KsPath::tr) {
    ks::tr_prod(dy, w, dx, dtype_, a, c, b, d, batch_, b * c * d, d, c * d, 1, tr_rows_,
                static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    if (bx_.path == KsPath::small)
      return ks::small_prod<T>(static_cast<const T*>(dy), static_cast<const T*>(w),
                               static_cast<T*>(dx), a, c, b, d, batch_, b * c * d, d, c * d, 1,
                               batch_last_, static_cast<cudaStream_t>(stream));
    ks::launch_prod<T>(static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx), a,
                       c, b, d, batch_, b * c * d, d, c * d, 1, batch_last_, tc_variant_,
                       static_cast<cudaStream_t>(stream));
  });
}

void KsPlan::backward(const void* dy, const void* x, const void* w, void* dx, float* dw32,
                      void* stream) const {
  // both on tr: pass rows are dw's (its buffer holds x' and dy'; dx's GEMM reads that dy')
  if (dx && dw32 && bx_.path == KsPath::tr && dw_path_ == KsPath::tr) {
    ks::tr_backward(dy, x, w, dx, dw32, dtype_, p_.a, p_.b, p_.c, p_.d, batch_, dw_chunk_,
                    dw_rows_, dw_ptrs_, static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  if (dx) backward_x(dy, w, dx, stream);
  if (dw32) backward_w(x, dy, dw32, stream);
}

void KsPlan::backward_w(const void* x, const void* dy, float* dw32, void* stream) const {
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d;
  if (dw_path_ == KsPath::tr) {
    ks::tr_dw(x, dy, dw32, dtype_, a, b, c, d, batch_, dw_chunk_, dw_rows_, dw_ptrs_,
              static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  if (dw_path_ == KsPath::blas) {
    ks::blas_dw(x, dy, dw32, dtype_, a, b, c, d, batch_, dw_chunk_, batch_last_, dw_ptrs_,
                static_cast<cudaStream_t>(stream));
    return ks::buffers_done(static_cast<cudaStream_t>(stream));
  }
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    ks::launch_gradw<T>(static_cast<const T*>(x), static_cast<const T*>(dy), dw32, a, b, c, d,
                        batch_, batch_last_, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace strux::cuda
