// Diagonal scan forward on float16 storage (channels-last layouts), computed in float32.
//
// Why: without it float16 arrays go through float32 copies of a and b and of h (30 bytes of
// traffic per value instead of 6; 5x slower than float32 on (4, 2048, 1024)). Here each step
// reads a row chunk of a and b in float16, updates the float32 state (kept in L1 scratch, so
// h_{t-1} is never re-read in half precision: the same values as the float32 path, rounded
// once) and stores h_t rounded to float16, in one pass. Compiled for F16C (x86-64-v3) besides
// the baseline, which converts in software.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/checked_size.hpp"
#include "cpu/scan/kernels.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"
#include "strux/scan.hpp"

namespace strux {
namespace cpu::scan {

namespace {

#define STRUX_HALF_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
STRUX_HALF_CLONES void to_float(const uint16_t* src, float* dst, int64_t n) {
  const _Float16* s = reinterpret_cast<const _Float16*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = float(s[i]);
}
// One step in one pass: s = a * s + b in float32, h = s rounded to nearest even (like numpy).
STRUX_HALF_CLONES void step(const uint16_t* __restrict a, const uint16_t* __restrict b, float* __restrict s,
                            uint16_t* __restrict h, int64_t n) {
  const _Float16* ah = reinterpret_cast<const _Float16*>(a);
  const _Float16* bh = reinterpret_cast<const _Float16*>(b);
  _Float16* hh = reinterpret_cast<_Float16*>(h);
  for (int64_t i = 0; i < n; ++i) {
    s[i] = float(ah[i]) * s[i] + float(bh[i]);
    hh[i] = _Float16(s[i]);
  }
}
#undef STRUX_HALF_CLONES

constexpr int64_t kChunk = 256;  // channels per task at least (512 bytes of a half row)

}  // namespace

void diag_forward_half(int64_t B, int64_t T, int64_t n, const uint16_t* a, const uint16_t* b, const uint16_t* h0,
                       uint16_t* h, const DiagLayout& L) {
  check_arg(!L.time_last || n == 1 || T == 1, "layout", "the float16 kernels take channels-last arrays only");
  static TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const Team team(tuner);
  const int nt = num_threads();
  const int64_t chunk = scan_chunk(B, n, kChunk), nch = (n + chunk - 1) / chunk;
  const int64_t Ta = L.a_time ? T : 1, aB = L.a_batch ? Ta * n : 0, aT = L.a_time ? n : 0;
  std::vector<float> scratch(size_t(2 * chunk * int64_t(nt)));  // the state and a_0 per thread
#pragma omp parallel num_threads(nt)
  {
    float* s = scratch.data() + 2 * chunk * int64_t(thread_index());
    float* af = s + chunk;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < B * nch; ++task) {
      const int64_t bi = task / nch, c0 = (task % nch) * chunk, len = std::min(chunk, n - c0);
      if (h0) {
        to_float(h0 + bi * n + c0, s, len);
      } else {  // s = a_0 * 0 (NaN where a_0 is not finite), then the step adds b_0
        to_float(a + bi * aB + (L.reverse ? T - 1 : 0) * aT + c0, af, len);
        for (int64_t i = 0; i < len; ++i) s[i] = af[i] * 0.0f;
      }
      for (int64_t t = 0; t < T; ++t) {
        const int64_t p = L.reverse ? T - 1 - t : t;
        step(a + bi * aB + p * aT + c0, b + (bi * T + p) * n + c0, s, h + (bi * T + p) * n + c0, len);
      }
    }
  }
}

}  // namespace cpu::scan

void diag_scan_forward_half(int64_t B, int64_t T, int64_t n, const uint16_t* a, const uint16_t* b,
                            const uint16_t* h0, uint16_t* h, DiagLayout layout) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(n, "n");
  checked_count("n", {B, T, n, int64_t(sizeof(float))});  // also the float32 scratch, if any
  check_arg(a && b && h, "h", "expected non-null a, b and h");
  cpu::scan::diag_forward_half(B, T, n, a, b, h0, h, layout);
}

}  // namespace strux
