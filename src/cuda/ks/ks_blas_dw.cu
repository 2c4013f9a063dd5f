// backward_w through cuBLAS on strided views (private to src/cuda/ks): the weight gradient of
// group (i, j) is a plain GEMM over the batch,
//   dW_(i,j)[k, l] = sum_n dY_(i,j)[k, n] X_(i,j)[l, n],
// on the same slabs as the product (ks_blas.cu): batch-last any d (b x batch and c x batch, row
// stride d*batch, unit stride along the batch), batch-first d == 1 (columns i*b + k, i*c + l of
// row-major (batch, a*b) / (batch, a*c)). In column-major terms each GEMM writes
// C (c x b, ld c) = X^T dY, i.e. the row-major (b, c) block dW_(i,j).
//
// The batch is cut into chunks of `chunk` rows (the last one may be shorter): chunk q of group
// (i, j) writes slot ((i*d + j)*S + q) of a float32 buffer of a*d*S slots (S = ceil(batch /
// chunk); b*c floats each, rounded up to 4), and one kernel adds the S slots of each element into dw32 at its (a, b, c, d) index.
// Why chunks: one float32 accumulation over n rows rounds to ~0.6 u sqrt(n) relative (u = 2^-24:
// 5e-6 at n = 25088); a chunk of 512-1024 rows keeps it at ~1e-6, and the chunks are extra
// independent GEMMs for a chip that a few b x c outputs would not fill. With one chunk and
// d == 1 the GEMM adds into dw32 directly (beta = 1, no buffer). Halves take longer chunks: their
// dw is rounded to the half type at the end, so the chunks only spread the work.
//
// Index sets (i, j, q) whose strides compose are fused into one batched index (e.g. (j, q) when
// the chunk divides the batch: rows j*batch + q*chunk = (j*S + q)*chunk); the longest remaining
// index is the GEMM's batch. Where other indices remain (e.g. i and q with d == 1, a > 1), a
// host loop of strided-batched calls would run a few small GEMMs per launch (an under-filled
// chip, launch after launch), so by default one small kernel writes the pointers of every
// (i, j, q) GEMM into the plan's buffer and one cublasGemmBatchedEx runs them all (where every
// pointer is 16-byte aligned; else the loop).
// measured: bench/NOTES-gpu-ks-scan.md#ks-dw-pointer-array
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/ks/ks_blas.hpp"

namespace strux::cuda::ks {
namespace {

int64_t cdiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

// At most this many floats of partial sums (64 MiB).
constexpr int64_t kMaxPartials = int64_t(1) << 24;

// dw32[((i*b + k)*c + l)*d + j] += sum_q buf[((i*d + j)*S + q)*slot + k*c + l] (slot: b*c
// rounded up to 4 floats, so that every slot starts 16-byte aligned). Threads walk the buffer's
// order (l fastest): coalesced reads; the writes are d floats apart.
__global__ void add_partials(const float* __restrict__ buf, float* __restrict__ dw, int64_t a,
                             int64_t b, int64_t c, int64_t d, int64_t S, int64_t slot) {
  const int64_t bc = b * c, n = a * d * bc;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = t / bc, r = t - g * bc;  // g = i*d + j, r = k*c + l
    const int64_t i = g / d, j = g - i * d;
    const float* p = buf + g * S * slot + r;
    float s = 0.f;
    for (int64_t q = 0; q < S; ++q) s += p[q * slot];
    dw[(i * bc + r) * d + j] += s;  // ((i*b + k)*c + l)*d + j
  }
}

// One index set of the GEMMs: count and the element strides of x, dy and the output.
struct Axis {
  int64_t n, sx, sy, so;
};

// Drops unit axes and fuses an outer axis with the next inner one where its strides are the
// inner axis's span (so the pair is one uniformly strided index).
std::vector<Axis> fuse(std::initializer_list<Axis> in) {
  std::vector<Axis> v;
  for (const Axis& ax : in) {
    if (ax.n == 1) continue;
    if (!v.empty()) {
      Axis& o = v.back();
      if (o.sx == ax.n * ax.sx && o.sy == ax.n * ax.sy && o.so == ax.n * ax.so) {
        o = Axis{o.n * ax.n, ax.sx, ax.sy, ax.so};
        continue;
      }
    }
    v.push_back(ax);
  }
  return v;
}

// Up to three index sets, the last one fastest: GEMM t of a pointer-array call.
struct PtrAxes {
  int na;
  Axis ax[3];
};

// pa[t], pb[t], pc[t] = x, dy, out + the offsets of GEMM t (x, dy: element size es).
__global__ void make_ptrs(PtrAxes pl, const char* x, const char* dy, float* out, int64_t es,
                          int64_t ox, int64_t oy, int64_t oo, int64_t count, const void** pa,
                          const void** pb, void** pc) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < count;
       t += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = t, px = ox, py = oy, po = oo;
    for (int e = pl.na - 1; e >= 0; --e) {
      const int64_t i = r % pl.ax[e].n;
      r /= pl.ax[e].n;
      px += i * pl.ax[e].sx, py += i * pl.ax[e].sy, po += i * pl.ax[e].so;
    }
    pa[t] = x + px * es;
    pb[t] = dy + py * es;
    pc[t] = out + po;
  }
}

bool a16(const char* p, int64_t bytes) { return (reinterpret_cast<uintptr_t>(p) + bytes) % 16 == 0; }

}  // namespace

int64_t blas_dw_chunk(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, DType dt) {
  const int64_t g = a * b * c * d;
  int64_t lo = dt == DType::f32 ? 512 : 2048;
  lo = std::max(lo, cdiv(batch, std::max<int64_t>(1, kMaxPartials / g)));
  lo = cdiv(lo, 8) * 8;  // chunk starts 16-byte aligned (tensor-core GEMMs for halves)
  if (batch <= lo) return batch;
  // Prefer a chunk that divides the batch: no short last chunk, and (j, q) fuse into one index.
  for (int64_t L = lo; L <= 2 * lo && L <= batch; L += 8)
    if (batch % L == 0) return L;
  return lo;
}

// The buffer: a*d*S slots of partial sums (slot_floats each), then three arrays of a*d*S GEMM
// pointers (16-byte aligned: slots are multiples of 4 floats).
static int64_t slot_floats(int64_t b, int64_t c) { return cdiv(b * c, 4) * 4; }

int64_t blas_dw_floats(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, int64_t chunk) {
  const int64_t S = cdiv(batch, chunk);
  if (S == 1 && d == 1) return 0;  // one GEMM call straight into dw32
  return a * d * S * (slot_floats(b, c) + 3 * int64_t(sizeof(void*) / sizeof(float)));
}

void blas_dw(const void* x, const void* dy, float* dw32, DType dt, int64_t a, int64_t b,
             int64_t c, int64_t d, int64_t batch, int64_t chunk, bool bl, bool ptr_arrays,
             cudaStream_t s) {
  BlasRes& r = blas_res(s);
  const cudaDataType ty = blas_type(dt);
  const int64_t es = int64_t(elem_bytes(dt));
  const int64_t L = chunk, nq = batch / L, rem = batch - nq * L, S = nq + (rem > 0), bc = b * c;
  const bool direct = S == 1 && d == 1;
  const int64_t slot = direct ? bc : slot_floats(b, c);  // direct: dw32's own (a, b, c) layout
  float* out = dw32;
  const int64_t P = a * d * S;  // GEMMs in all (pointer-array slots)
  const void** pa = nullptr;
  if (!direct) {
    check_arg(r.dwcap >= blas_dw_floats(a, b, c, d, batch, chunk), "plan",
              "ks cuBLAS dw buffer not reserved");
    out = r.dwbuf;
    pa = reinterpret_cast<const void**>(r.dwbuf + a * d * S * slot);
  }
  // bsl: x slab (L x c, column-major, ld d*batch) at ((i*c)*d + j)*batch + q*L, likewise dy;
  // C (c x b) = op(X) op(dY) with op(X) = X^T, op(dY) = dY.
  // bsf (d == 1): X (c x L, ld a*c) at i*c + q*L*a*c, dY (b x L, ld a*b): C = X dY^T; with
  // d > 1 the transposed x', dy' of tr_dw: group g = i*d + j at g*c (ld a*c*d) and g*b (ld a*b*d).
  const Axis ai =
      bl ? Axis{a, c * d * batch, b * d * batch, d * S * slot} : Axis{a * d, c, b, S * slot};
  const Axis aj = bl ? Axis{d, batch, batch, S * slot} : Axis{1, 0, 0, 0};
  const Axis aq = bl ? Axis{nq, L, L, slot} : Axis{nq, L * a * c * d, L * a * b * d, slot};
  const cublasOperation_t ta = bl ? CUBLAS_OP_T : CUBLAS_OP_N, tb = bl ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int lda = int(bl ? d * batch : a * c * d), ldb = int(bl ? d * batch : a * b * d);
  const float one = 1.f, zero = 0.f;
  const char* xb = static_cast<const char*>(x);
  const char* yb = static_cast<const char*>(dy);
  // base: the first pointer slot of this part (full chunks 0, the short last chunk a*d*nq)
  auto run = [&](std::vector<Axis> axes, int64_t k, int64_t ox, int64_t oy, int64_t oo,
                 int64_t base) {
    int64_t count = 1;
    for (const Axis& ax : axes) count *= ax.n;
    // cuBLAS cannot see the pointers of a pointer-array call and assumes them aligned (a 2-byte
    // aligned half pointer faults: misaligned address), so only 16-byte aligned sets go that way.
    bool aligned = a16(xb, ox * es) && a16(yb, oy * es) && oo % 4 == 0;
    for (const Axis& ax : axes)
      aligned = aligned && ax.sx * es % 16 == 0 && ax.sy * es % 16 == 0 && ax.so % 4 == 0;
    if (ptr_arrays && pa && axes.size() > 1 && aligned) {
      PtrAxes pl{int(axes.size()), {}};
      for (size_t e = 0; e < axes.size(); ++e) pl.ax[e] = axes[e];
      const void** qa = pa + base;
      const void** qb = pa + P + base;
      void** qc = const_cast<void**>(pa + 2 * P + base);
      const int blocks = int(std::min<int64_t>(cdiv(count, 256), 1024));
      make_ptrs<<<blocks, 256, 0, s>>>(pl, xb, yb, out, es, ox, oy, oo, count, qa, qb, qc);
      STRUX_LAUNCH("ks make_ptrs");
      STRUX_CUBLAS(cublasGemmBatchedEx(r.h, ta, tb, int(c), int(b), int(k), &one, qa, ty, lda, qb,
                                       ty, ldb, direct ? &one : &zero, qc, CUDA_R_32F, int(c),
                                       int(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      return;
    }
    // the longest index is the GEMM batch; the rest are looped
    Axis bat{1, 0, 0, 0};
    if (!axes.empty()) {
      auto it = std::max_element(axes.begin(), axes.end(),
                                 [](const Axis& u, const Axis& v) { return u.n < v.n; });
      bat = *it;
      axes.erase(it);
    }
    std::vector<int64_t> idx(axes.size(), 0);
    for (;;) {
      int64_t px = ox, py = oy, po = oo;
      for (size_t e = 0; e < axes.size(); ++e)
        px += idx[e] * axes[e].sx, py += idx[e] * axes[e].sy, po += idx[e] * axes[e].so;
      STRUX_CUBLAS(cublasGemmStridedBatchedEx(
          r.h, ta, tb, int(c), int(b), int(k), &one, xb + px * es, ty, lda, bat.sx, yb + py * es,
          ty, ldb, bat.sy, direct ? &one : &zero, out + po, CUDA_R_32F, int(c), bat.so,
          int(bat.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      size_t e = 0;
      for (; e < axes.size(); ++e) {
        if (++idx[e] < axes[e].n) break;
        idx[e] = 0;
      }
      if (e == axes.size()) break;
    }
  };
  if (nq > 0) run(fuse({ai, aj, aq}), L, 0, 0, 0, 0);
  if (rem > 0) run(fuse({ai, aj}), rem, nq * aq.sx, nq * aq.sy, nq * aq.so, a * d * nq);
  if (!direct) {
    const int64_t n = a * d * bc;
    const int blocks = int(std::min<int64_t>(cdiv(n, 256), 4096));
    add_partials<<<blocks, 256, 0, s>>>(out, dw32, a, b, c, d, S, slot);
    STRUX_LAUNCH("ks add_partials");
  }
}

}  // namespace strux::cuda::ks
