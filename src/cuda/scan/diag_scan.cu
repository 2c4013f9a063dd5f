// DiagScanPlan: argument checks, workspace layout and dtype dispatch for the diagonal scan.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/check.hpp"
#include "cuda/scan/diag_scan_kernel.cuh"
#include "strux/core.hpp"
#include "strux/cuda/scan.hpp"

namespace strux::cuda {

namespace {
struct Layout {
  int64_t ctiles, n_tiles, n_chunks, nblk, vbytes;
  int64_t flags_off, aggA_off, aggH_off, incl_off, total, zero_bytes;
};

int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

Layout layout(int64_t B, int64_t T, int64_t n, DType dt) {
  using namespace scan;
  Layout L{};
  L.ctiles = (n + CW - 1) / CW;
  L.n_tiles = B * L.ctiles;
  L.n_chunks = (T + CH - 1) / CH;
  L.nblk = L.n_tiles * L.n_chunks;
  L.vbytes = dt == DType::c64 ? 8 : 4;
  L.flags_off = 256;  // the block counter lives at offset 0
  L.aggA_off = align256(L.flags_off + 4 * L.nblk);
  L.zero_bytes = L.aggA_off;  // counter and flags start at zero on every call
  const int64_t vb = align256(L.nblk * CW * L.vbytes);
  L.aggH_off = L.aggA_off + vb;
  L.incl_off = L.aggH_off + vb;
  L.total = L.incl_off + vb;
  return L;
}

template <class S, bool REV>
void launch(const scan::ScanArgs<S, typename scan::Tr<S>::V>& args0, const Layout& L, void* ws,
            cudaStream_t s) {
  using V = typename scan::Tr<S>::V;
  auto args = args0;
  char* w = static_cast<char*>(ws);
  args.ctiles = L.ctiles;
  args.n_tiles = L.n_tiles;
  args.n_chunks = L.n_chunks;
  args.counter = reinterpret_cast<int*>(w);
  args.flags = reinterpret_cast<int*>(w + L.flags_off);
  args.aggA = reinterpret_cast<V*>(w + L.aggA_off);
  args.aggH = reinterpret_cast<V*>(w + L.aggH_off);
  args.incl = reinterpret_cast<V*>(w + L.incl_off);
  STRUX_CUDA(cudaMemsetAsync(ws, 0, size_t(L.zero_bytes), s));
  scan::diag_scan_kernel<S, REV><<<unsigned(L.nblk), scan::CW * scan::TW, 0, s>>>(args);
  STRUX_LAUNCH("diag_scan_kernel");
}

template <class F>
void by_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    case DType::c64: return f(float2{});
    default: break;
  }
  throw TypeError("diag_scan: unsupported dtype");
}
}  // namespace

DiagScanPlan::DiagScanPlan(int64_t B, int64_t T, int64_t n, DType dtype)
    : B_(B), T_(T), n_(n), dtype_(dtype) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(n, "n");
  check_arg(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::c64, "dtype",
            "expected float32, float16, bfloat16 or complex64, got ", dtype_name(dtype));
  check_arg(layout(B, T, n, dtype).nblk < (int64_t(1) << 31), "a", "too many blocks for shape (",
            B, ", ", T, ", ", n, ")");
}

int64_t DiagScanPlan::workspace_bytes() const { return layout(B_, T_, n_, dtype_).total; }

void DiagScanPlan::forward(const void* a, const void* b, const void* h0, void* h, void* ws,
                           void* stream, float scale) const {
  const Layout L = layout(B_, T_, n_, dtype_);
  by_type(dtype_, [&](auto z) {
    using S = decltype(z);
    scan::ScanArgs<S, typename scan::Tr<S>::V> args{};
    args.a = static_cast<const S*>(a);
    args.b = static_cast<const S*>(b);
    args.h0 = static_cast<const S*>(h0);
    args.h = static_cast<S*>(h);
    args.B = B_, args.T = T_, args.n = n_;
    args.scale = scale;
    launch<S, false>(args, L, ws, static_cast<cudaStream_t>(stream));
  });
}

void DiagScanPlan::backward(const void* a, const void* h, const void* h0, const void* dh, void* da,
                            void* db, void* dh0, void* ws, void* stream) const {
  const Layout L = layout(B_, T_, n_, dtype_);
  by_type(dtype_, [&](auto z) {
    using S = decltype(z);
    scan::ScanArgs<S, typename scan::Tr<S>::V> args{};
    args.a = static_cast<const S*>(a);
    args.b = static_cast<const S*>(dh);
    args.h0 = static_cast<const S*>(h0);
    args.hf = static_cast<const S*>(h);
    args.da = static_cast<S*>(da);
    args.db = static_cast<S*>(db);
    args.dh0 = static_cast<S*>(dh0);
    args.B = B_, args.T = T_, args.n = n_;
    args.scale = 1.f;
    launch<S, true>(args, L, ws, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace strux::cuda
