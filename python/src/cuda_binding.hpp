// Shared by the CUDA bindings (bind_cuda_*.cpp): raw pointers, the device guard, and the plans'
// options as they cross the binding -- one int per family, packed by strux/_cuda_options.py (which
// validates the user's dict and names what is wrong), so that a call passes one argument and a
// plan cache keys on one number; 0 (-1 for the scans) is every default (the solver tables decide).
#pragma once
#ifdef STRUX_HAVE_CUDA

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/check.hpp"
#include "strux/core.hpp"
#include "strux/cuda/ks.hpp"
#include "strux/cuda/scan.hpp"

namespace strux::py {

inline void* ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }

// Launches go to `device` (the arrays' device), whatever the thread's current device is; the
// previous device is restored on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    int cur = 0;
    STRUX_CUDA(cudaGetDevice(&cur));
    if (cur != device) {
      STRUX_CUDA(cudaSetDevice(device));
      prev_ = cur;
    }
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// ks: bits 0-2 path (0 auto, 1 kernels, 2 blas, 3 stream, 4 tr, 5 small), bits 3-4 stream_tn (0 auto,
// 1: 32, 2: 64, 3: 128), bits 5-6 stream_mt (0 auto, 1, 2), bit 7 dw_ptrs off, bits 8-9
// tc_variant + 1 (0 auto).
inline strux::cuda::KsOptions ks_options(int64_t code) {
  using strux::cuda::KsPath;
  check_arg(code >= 0 && code < (int64_t(1) << 10), "options", "bad ks options code ", code);
  strux::cuda::KsOptions o;
  const int path = int(code & 7);
  check_arg(path <= 6, "options", "bad ks path code ", path);
  if (path) {
    const KsPath paths[] = {KsPath::kernels, KsPath::kernels, KsPath::blas, KsPath::stream,
                            KsPath::tr,      KsPath::small,   KsPath::dense};
    o.path = paths[path];
  }
  const int tn = int((code >> 3) & 3);
  o.stream_tn = tn ? 16 << tn : 0;
  o.stream_mt = int((code >> 5) & 3);
  o.dw_ptrs = !((code >> 7) & 1);
  o.tc_variant = int((code >> 8) & 3) - 1;
  return o;
}

// diag_scan: -1 auto, else DiagScanAlgo in bits 0-3 (0 lookback, 1 seq1, 2 seqv, 3 chunk, 4 pipe,
// 5 rows, 6 tile) and, for tile, tile_bytes in bits 4-6 (0 auto, 1: 32, 2: 64, 3: 128, 4: 256).
inline strux::cuda::DiagScanOptions diag_scan_options(int code) {
  strux::cuda::DiagScanOptions o;
  if (code == -1) return o;
  const int algo = code & 15, tb = (code >> 4) & 7;
  check_arg(code >= 0 && code < 128 && algo <= 6 && tb <= 4 && (tb == 0 || algo == 6), "options", "bad diag_scan options code ",
            code);
  o.algo = strux::cuda::DiagScanAlgo(algo);
  o.tile_bytes = tb ? 16 << tb : 0;
  return o;
}

// block_circulant_scan: registers -1 auto, 0 generic, 1 register kernels; chunk 0 auto.
inline strux::cuda::BlockCirculantScanOptions block_scan_options(int registers, int64_t chunk) {
  check_arg(registers >= -1 && registers <= 1, "options", "bad registers code ", registers);
  strux::cuda::BlockCirculantScanOptions o;
  if (registers >= 0) o.registers = registers == 1;
  o.chunk = chunk;
  return o;
}

}  // namespace strux::py

#endif  // STRUX_HAVE_CUDA
