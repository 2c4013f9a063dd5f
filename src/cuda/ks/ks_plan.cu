// KsPlan: argument checks, the path rules (kernels, cuBLAS, streaming or transpositions +
// cuBLAS) and dtype dispatch for the ks family.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cuda/check.hpp"
#include "cuda/ks/ks_blas.hpp"
#include "cuda/ks/ks_stream.hpp"
#include "cuda/ks/ks_tr.hpp"
#include "strux/core.hpp"
#include "strux/cuda/ks.hpp"

namespace strux::cuda {
namespace ks {
template <class T>
void launch_prod(const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, int64_t, int64_t, bool, cudaStream_t);
template <class T>
void launch_gradw(const T*, const T*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                  cudaStream_t);
}  // namespace ks

namespace {
// The product path, in ONE place: the ks tile kernels (ks_launch.cuh), cuBLAS on strided views
// of x and y (ks_blas.cu), the batch-last float32 streaming kernel (ks_stream.cuh), or for
// batch-first d > 1 the transposition path (ks_tr.cu), by (pattern, layout, dtype). backward_x
// asks with pattern (a, c, b, d) and dx = true.
// STRUX_KS_PATH=tc|blas|stream|tr (read at each plan construction) forces one where it applies
// (else the kernels; =tr: else the rule; =stream for half types: the rule); STRUX_KS_STREAM_TN=
// 32|64|128 and STRUX_KS_STREAM_MT=1|2 force the streaming batch tile and m16 tiles per warp
// item. Knobs for the tests and the bench only.
// float32, measured (H200, 2026-11-21, batch 25088, both paths forced in one run, ms
// kernels / cuBLAS, bmm-with-permutations in brackets):
//   batch-last:  (1,48,48,16) 0.136/0.125 [0.163]  (2,96,384,4) 0.543/0.520 [0.751]
//                (2,192,48,4) 0.234/0.180 [0.293]  (1,768,768,1) 0.652/0.711 [0.689]
//                (6,64,64,1) 0.087/0.080 [0.061]   (1,768,192,2) 0.594/0.401 [0.493]
//                (4,64,64,4) 0.181/0.159 [0.284]   (1,256,256,4) 0.515/0.368 [0.420]
//                (4,96,96,2) 0.196/0.163 [0.257]   (16,64,64,1) 0.161/0.143 [0.123]
//   batch-first (d = 1 only): (1,768,768,1) 0.626/0.690, (6,64,64,1) 0.085/0.082,
//                (16,64,64,1) 0.157/0.163 (a tie at best; d > 1 has no BLAS layout).
// Streaming kernel (ks v5, same machine, back to back = GPU time, ms stream / cuBLAS, forward;
// (dx) where it differs): (6,64,64,1) 0.041 / 0.048, (16,64,64,1) 0.088 / 0.109, (1,48,48,16)
// 0.068 / 0.094, (4,64,64,4) 0.091 / 0.127, (4,96,96,2) 0.114 / 0.131, (2,192,48,4) 0.116 /
// 0.149: it wins every measured batch-last group with 48 <= b, c <= 192, b*c <= 9216 where its
// 128-column tile fits; where only a narrower one does it loses (dx of (2,192,48,4), i.e.
// (2,48,192,4): W 96 KB + 192-row tiles leave tn = 64: 0.189 / 0.142). Larger W and smaller b,
// c run when forced: correct, unmeasured.
// So: batch-last with b, c >= 32, b*c <= 96*96 and the 128-column tile -> stream (dx with only
// a narrower tile: the kernels, see backward_x below); other batch-last -> cuBLAS, except one
// big group (a*d == 1, b*c >= 2^19) in the forward, where the 3xTF32 tensor cores beat float32
// FFMA SGEMM (its dx: cuBLAS); batch-first d == 1: forward the kernels, dx cuBLAS; batch-first
// d > 1 from batch 1024 -> tr (below); else the kernels.
// ks v5b (tr): batch-first d > 1 (where cuBLAS on views does not apply): in-row transposition
// of x, cuBLAS GEMM, in-place in-row transposition of y (ks_tr.cu).
// Measured (H200, 2026-11-21, fp32, ms tr / kernels [bmm]): batch 25088: (1,48,48,16) 0.221/0.403 [0.475], (2,96,384,4) 0.651/0.775 [0.843],
// (2,192,48,4) 0.279/0.372 [0.321], (1,768,192,2) 0.485/0.667 [0.514], (4,64,64,4) 0.266/0.273
// [0.304], (1,256,256,4) 0.436/0.626 [0.510], (4,96,96,2) 0.242/0.241 [0.264]; batch 4096 and
// 1024: tr ahead of the kernels on all four patterns timed. Batch 256 (ks v5d, per call,
// host-bound): ties (0.030 vs 0.028-0.033) but (1,768,192,2) 0.032 vs 0.058; below 1024 the
// kernels' single launch is kept.
// float16 / bfloat16: the ks kernels have no tensor cores for halves (FFMA in float32), cuBLAS
// GemmEx does (float32 accumulation): cuBLAS wherever the strided views apply (batch-last any
// d, batch-first d == 1), tr for batch-first d > 1 (ks v5d), from batch 1024 as float32.
// Measured (H200, 2026-11-21, bf16, batch 25088, ms cuBLAS / FFMA kernel [bmm, same dtype]):
// bsl (1,48,48,16) 0.059/0.309 [0.086], (2,96,384,4) 0.091/1.141 [0.321], (1,768,768,1)
// 0.076/2.661 [0.059], (16,64,64,1) 0.061/0.331 [0.043]; bsf (1,768,768,1) 0.076/1.567 [0.059],
// (16,64,64,1) 0.061/0.282 [0.108] (fp16 the same within 5%). Batch-first d > 1 (ks v5d, same
// machine, ms per call tr / FFMA kernel [bmm, same dtype], bf16; fp16 within 3%): (1,48,48,16)
// 0.095/0.619 [0.164], (2,96,384,4) 0.187/1.329 [0.351], (2,192,48,4) 0.107/0.345 [0.183],
// (1,768,192,2) 0.114/0.865 [0.170], (4,64,64,4) 0.109/0.324 [0.183], (1,256,256,4)
// 0.113/1.069 [0.193], (4,96,96,2) 0.091/0.279 [0.141]: tr 1.49-1.88x bmm; at batch 1024 tr
// 0.028-0.031 vs kernels 0.029-0.080 (host-bound), at 256 mixed (0.028 vs 0.022 at
// (1,48,48,16), 0.031 vs 0.081 at (1,768,192,2)): tr from 1024, as float32.
// backward_x (dx = true; ks v5d, H200, 2026-11-21, fp32, batch 25088, dx alone, ms per call /
// back to back, forced kernels / cuBLAS / stream): bsl (1,768,768,1) 0.835/0.809 | 0.660/0.629
// | -: the 3xTF32 kernels that win the forward of this one big group lose its dx (w read
// transposed), so dx takes cuBLAS; bsl (2,192,48,4), i.e. the (2,48,192,4) product, 0.141/0.120
// | 0.167/0.142 | 0.211/0.190 (tn = 64): where a stream-sized group gets only a narrower tile,
// dx takes the kernels. Every other bsl dx as the rule had it (stream or cuBLAS, within 2% of
// the best forced path: (1,48,48,16) 0.068 stream b2b, (2,96,384,4) 0.389 cuBLAS, (6,64,64,1)
// 0.041, (1,768,192,2) 0.356, (4,64,64,4) 0.090, (1,256,256,4) 0.331, (4,96,96,2) 0.115,
// (16,64,64,1) 0.089).
// Batch-first d == 1 dx, ms per call / back to back, kernels | cuBLAS: (1,768,768,1) 0.801/0.772
// | 0.710/0.675, (6,64,64,1) 0.085/0.061 | 0.078/0.050, (16,64,64,1) 0.161/0.138 | 0.146/0.116,
// (1,768,64,1) 0.138/0.113 | 0.096/0.064, (1,200,1031,1) 0.397/0.370 | 0.303/0.267: dx takes
// cuBLAS wherever the views apply (the forward keeps the kernels there: a tie, see above).
KsPlan::Choice pick_path(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool bl,
                         DType dt, bool dx) {
  const char* e = std::getenv("STRUX_KS_PATH");
  const bool f32 = dt == DType::f32;
  const char* tn = std::getenv("STRUX_KS_STREAM_TN");
  const char* mt = std::getenv("STRUX_KS_STREAM_MT");
  const ks::StreamCfg sc = bl && f32 ? ks::stream_pick(b, c, tn ? std::atoi(tn) : 0,
                                                       mt ? std::atoi(mt) : 0)
                                     : ks::StreamCfg{};
  const KsPlan::Choice stream{KsPath::stream, sc.tn, sc.stages, sc.mt},
      blas{KsPath::blas, 0, 0, 0}, kernels{};
  const KsPlan::Choice tr{KsPath::tr, 0, 0, 0};
  const bool blas_ok = ks::blas_applies(a, b, c, d, batch, bl);
  const bool tr_ok = ks::tr_applies(a, b, c, d, batch, bl);
  if (e && f32 && std::strcmp(e, "stream") == 0) return sc.ok() ? stream : kernels;
  if (e && std::strcmp(e, "blas") == 0) return blas_ok ? blas : kernels;
  if (e && std::strcmp(e, "tc") == 0) return kernels;
  if (e && std::strcmp(e, "tr") == 0 && tr_ok) return tr;
  if (!f32) {
    if (blas_ok) return blas;
    if (tr_ok && batch >= 1024) return tr;
    return kernels;
  }
  const bool stream_size = b >= 32 && c >= 32 && b * c <= 96 * 96;
  if (sc.tn == 128 && stream_size) return stream;
  if (dx && bl && stream_size && sc.ok()) return kernels;  // dx, narrow tile (above)
  const bool big_group = a * d == 1 && b * c >= (int64_t(1) << 19);
  if (blas_ok && (dx || (bl && !big_group))) return blas;
  if (tr_ok && batch >= 1024) return tr;
  return kernels;
}

// backward_w (every dtype): dW_(i,j) = dY_(i,j) X_(i,j)^T is a GEMM over the batch: cuBLAS on
// the strided views where they apply (batch-last any d, batch-first d == 1); batch-first d > 1
// on in-row transposed copies of x and dy (tr, ks v5d) from batch 1024 (the products' bound);
// else the ks kernel (float atomics, no tensor cores). STRUX_KS_PATH=tc forces the kernel,
// =blas cuBLAS on views where they apply (else the kernel), =tr the transposed copies where
// they apply (else the rule).
// Measured (H200, 2026-11-21, fp32, batch 25088, dw alone, ms cuBLAS / kernel): bsl
// (1,48,48,16) 0.130/0.295, (2,96,384,4) 0.505/1.490, (1,768,768,1) 0.662/2.378,
// (6,64,64,1) 0.093/0.164, (16,64,64,1) 0.139/0.365; bsf (1,768,768,1) 0.648/2.827,
// (16,64,64,1) 0.131/0.400; bf16 0.05-0.10 vs 0.13-2.4. Never slower: cuBLAS where it applies.
// Batch-first d > 1 (ks v5d, dw alone, ms per call tr / kernel, batch 25088): fp32
// (1,48,48,16) 0.203/0.437, (2,96,384,4) 0.729/1.920, (2,192,48,4) 0.264/0.566, (1,768,192,2)
// 0.507/1.422, (4,64,64,4) 0.233/0.413, (1,256,256,4) 0.442/1.275, (4,96,96,2) 0.249/0.689;
// bf16 0.119-0.216 vs 0.343-1.636; errors fp32 4.2-5.1e-7 (kernel 3.3-6.1e-7). Batch 1024:
// ties (0.061-0.078 vs 0.061-0.083), 4096: tr 1.1-2.7x ahead, 256: the kernel ahead (0.037-0.050
// vs 0.049-0.066): tr from 1024.
KsPath pick_dw_path(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool bl) {
  const char* e = std::getenv("STRUX_KS_PATH");
  const bool blas_ok = ks::blas_applies(a, b, c, d, batch, bl);
  const bool tr_ok = ks::tr_dw_applies(a, b, c, d, batch, bl);
  if (e && std::strcmp(e, "tc") == 0) return KsPath::kernels;
  if (e && std::strcmp(e, "blas") == 0) return blas_ok ? KsPath::blas : KsPath::kernels;
  if (e && std::strcmp(e, "tr") == 0 && tr_ok) return KsPath::tr;
  if (blas_ok) return KsPath::blas;
  if (tr_ok && batch >= 1024) return KsPath::tr;
  return KsPath::kernels;
}
}  // namespace

const char* ks_path_name(KsPath p) {
  switch (p) {
    case KsPath::blas: return "blas";
    case KsPath::stream: return "stream";
    case KsPath::tr: return "tr";
    default: return "kernels";
  }
}

KsPlan::KsPlan(KsPattern p, int64_t batch, bool batch_last, DType dtype)
    : p_(p), batch_(batch), batch_last_(batch_last), dtype_(dtype) {
  check_positive(p.a, "a");
  check_positive(p.b, "b");
  check_positive(p.c, "c");
  check_positive(p.d, "d");
  check_positive(batch, "batch");
  check_arg(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16, "dtype",
            "expected float32, float16 or bfloat16, got ", dtype_name(dtype));
  // Tile counts go to gridDim.x (< 2^31): generous for any batch that fits in memory.
  check_arg(batch / 128 + 1 < (int64_t(1) << 31), "batch", "too large: ", batch);
  fwd_ = pick_path(p.a, p.b, p.c, p.d, batch, batch_last, dtype, false);
  bx_ = pick_path(p.a, p.c, p.b, p.d, batch, batch_last, dtype, true);
  const int64_t es = int64_t(ks::elem_bytes(dtype));
  const bool trf = fwd_.path == KsPath::tr, trb = bx_.path == KsPath::tr;
  if (trf || trb)
    tr_rows_ = ks::tr_reserve(p.a * std::max(trf ? p.c : 0, trb ? p.b : 0) * p.d * es, batch);
  dw_path_ = pick_dw_path(p.a, p.b, p.c, p.d, batch, batch_last);
  // the rows of one dw GEMM batch: the whole batch, or one pass of the transposed copies
  int64_t dw_batch = batch;
  if (dw_path_ == KsPath::tr)
    dw_batch = dw_rows_ = ks::tr_reserve(p.a * (p.b + p.c) * p.d * es, batch);
  if (dw_path_ != KsPath::kernels) {
    dw_chunk_ = ks::blas_dw_chunk(p.a, p.b, p.c, p.d, dw_batch, dtype);
    // STRUX_KS_DW_PTRS=0 (bench knob): a host loop of strided-batched GEMM calls instead of one
    // pointer-array call where one strided call cannot cover every (i, j, chunk).
    const char* e = std::getenv("STRUX_KS_DW_PTRS");
    dw_ptrs_ = !(e && std::strcmp(e, "0") == 0);
  }
  // Buffers for the cuBLAS paths, grown here so that no call allocates.
  const int64_t abcd = p.a * p.b * p.c * p.d;
  const bool wbuf = fwd_.path == KsPath::blas || bx_.path == KsPath::blas ||
                    fwd_.path == KsPath::tr || bx_.path == KsPath::tr;
  const int64_t w_bytes = wbuf ? abcd * int64_t(ks::elem_bytes(dtype)) : 0;
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
  if (fwd_.path == KsPath::blas)
    return ks::blas_prod(x, w, y, dtype_, a, b, c, d, batch_, b * c * d, c * d, d, 1, batch_last_,
                         static_cast<cudaStream_t>(stream));
  if (fwd_.path == KsPath::tr)
    return ks::tr_prod(x, w, y, dtype_, a, b, c, d, batch_, b * c * d, c * d, d, 1, tr_rows_,
                       static_cast<cudaStream_t>(stream));
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    ks::launch_prod<T>(static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), a,
                       b, c, d, batch_, b * c * d, c * d, d, 1, batch_last_,
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
  if (bx_.path == KsPath::blas)
    return ks::blas_prod(dy, w, dx, dtype_, a, c, b, d, batch_, b * c * d, d, c * d, 1, batch_last_,
                         static_cast<cudaStream_t>(stream));
  if (bx_.path == KsPath::tr)
    return ks::tr_prod(dy, w, dx, dtype_, a, c, b, d, batch_, b * c * d, d, c * d, 1, tr_rows_,
                       static_cast<cudaStream_t>(stream));
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    ks::launch_prod<T>(static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx), a,
                       c, b, d, batch_, b * c * d, d, c * d, 1, batch_last_,
                       static_cast<cudaStream_t>(stream));
  });
}

void KsPlan::backward(const void* dy, const void* x, const void* w, void* dx, float* dw32,
                      void* stream) const {
  // both on tr: pass rows are dw's (its buffer holds x' and dy'; dx's GEMM reads that dy')
  if (dx && dw32 && bx_.path == KsPath::tr && dw_path_ == KsPath::tr)
    return ks::tr_backward(dy, x, w, dx, dw32, dtype_, p_.a, p_.b, p_.c, p_.d, batch_, dw_chunk_,
                           dw_rows_, dw_ptrs_, static_cast<cudaStream_t>(stream));
  if (dx) backward_x(dy, w, dx, stream);
  if (dw32) backward_w(x, dy, dw32, stream);
}

void KsPlan::backward_w(const void* x, const void* dy, float* dw32, void* stream) const {
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d;
  if (dw_path_ == KsPath::tr)
    return ks::tr_dw(x, dy, dw32, dtype_, a, b, c, d, batch_, dw_chunk_, dw_rows_, dw_ptrs_,
                     static_cast<cudaStream_t>(stream));
  if (dw_path_ == KsPath::blas)
    return ks::blas_dw(x, dy, dw32, dtype_, a, b, c, d, batch_, dw_chunk_, batch_last_, dw_ptrs_,
                       static_cast<cudaStream_t>(stream));
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    ks::launch_gradw<T>(static_cast<const T*>(x), static_cast<const T*>(dy), dw32, a, b, c, d,
                        batch_, batch_last_, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace strux::cuda
