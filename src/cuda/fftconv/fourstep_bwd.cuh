// Pass B' of the four-step fftconv backward (the row pass; passes A and C are the forward's
// column kernels, fourstep.cuh, with the epilogues of fourstep_epi.cuh). Given Xv and Xg after
// pass A (v = u ⊙ pre and dz = dy ⊙ post, [B·H][M1][M2] complex), per row pair (ka, kb) = (k1,
// M1 − k1) as rows_kernel pairs them: V̂ and Ĝ of both rows, then
//   dV̂ = conj(K̂)·Ĝ merged and transformed back into Xg (pass C makes du, dpre from it);
//   dK̂ = Σ_b conj(V̂_b)·Ĝ_b / nfft, summed over b inside the CTA (deterministic, no atomics),
//     transformed back into Xdk ([H][M1][M2]; pass C makes dk, dskip from it);
//   Ẑ = K̂·V̂ merged and transformed back into Xv when dpost is wanted.
// The float64 model of every index: bench/fftconv_fourstep_bwd_model.py (rows_backward).
#pragma once

#include "cuda/fftconv/fourstep.cuh"

namespace strux::cuda::fourstep {

// Four rows per CTA (V̂ and Ĝ of ka and kb), one group of M2/16 threads each: the two transforms
// of a pair run side by side rather than one after the other with V̂'s split values parked.
__host__ __device__ constexpr int bwd_threads(int M2) { return M2 / 4; }
// Shared memory: the four padded rows, then the dK̂ accumulator (2·M2 values in K̂'s block order:
// pair j's f at j, M − f at M2 + j): 100 KB at M2 = 2048, 51 KB at 1024, so two and four CTAs
// fit per SM.
__host__ __device__ constexpr size_t bwd_smem(int M2) { return (size_t(4) * (padded(M2) + 1) + 2 * size_t(M2)) * 8; }
// 1024 threads per SM (64 registers), two CTAs at M2 = 2048 so that one CTA's loads overlap the
// other's transforms (one CTA alone leaves HBM idle through every FFT phase). The staged loads
// and stores read tid afresh; with the loop-invariant tid of rows_kernel the loads spilled here.
__host__ __device__ constexpr int kBwdMinBlocks(int M2) { return 1024 / bwd_threads(M2); }

// CTA blockIdx.x = h·(M1/2 + 1) + k1; loops over b (rows b·H + h). Groups 0, 1: rows ka, kb of Xv;
// 2, 3: rows ka, kb of Xg; rows 0 and M1/2 are their own partners, group 0's (2's) copy used.
template <int M2>
__global__ void __launch_bounds__(bwd_threads(M2), kBwdMinBlocks(M2))
    rows_backward(float2* __restrict__ Xv, float2* __restrict__ Xg, const float2* __restrict__ khat,
                  float2* __restrict__ Xdk, int M1, int64_t B, int64_t H, bool need_z) {
  constexpr int T2 = M2 / 16, S = padded(M2) + 1, NT = bwd_threads(M2);
  extern __shared__ float2 sm[];
  float2* acc = sm + 4 * S;
  const int M = M1 * M2;
  const int h = int(blockIdx.x / (M1 / 2 + 1));
  const int k1 = int(blockIdx.x % (M1 / 2 + 1));
  const int ka = k1, kb = (M1 - k1) & (M1 - 1);
  const int grp = threadIdx.x / T2;
  const int kr = grp & 1 ? kb : ka;
  float2* buf = sm + grp * S;
  // the pair's rows: V at sm (ka) and sm + ob (kb), G at sm + 2S and sm + 2S + ob
  const int ob = ka == kb ? 0 : S;
  const bool own = (grp & 1) == 0 || ka != kb;  // this group's row is stored
  const int npairs = ka != kb ? M2 : k1 == 0 ? M2 / 2 + 1 : M2 / 2;
  const float inv_n = 0.5f / float(M);  // 1/nfft, exact
  // tid read afresh in every phase, staged loads and stores: as rows_kernel, for the same reasons.
  auto tid_now = [] { return fused::fresh_tid() & (T2 - 1); };
  auto from_buf = [&](int n) { return buf[pad(n)]; };
  auto to_buf = [&](int i, float2 x) { buf[pad(i)] = x; };
  // dK̂ / nfft of pair j merged into the V rows (then transformed back like a product)
  auto merge_dk = [&](int j, int pb, int f, float2 w) {
    const Pair y = merge_pair(scale2(acc[j], inv_n), scale2(acc[M2 + j], inv_n), w);
    sm[pad(j)] = y.f;
    if (f != 0) sm[ob + pad(pb)] = y.g;
  };
  // Inverse FFT of every group's row, then the conjugate twiddle on the way to dst (this group's row).
  auto inverse_to = [&](float2* dst, bool store) {
    __syncthreads();  // every merged value is in place before the inverse's first loads
    fused::fft<M2, T2, +1>(buf, tid_now(), from_buf, to_buf);
    __syncthreads();
    if (store) {
#pragma unroll 4
      for (int n = tid_now(); n < M2; n += T2) dst[n] = mulf2(buf[pad(n)], twiddle<+1>(n * kr, M));
    }
  };
  for (int64_t b = 0; b < B; ++b) {
    const bool last = b == B - 1;
    float2* xr = (grp < 2 ? Xv : Xg) + (b * H + h) * int64_t(M) + int64_t(kr) * M2;
    if (b > 0) __syncthreads();  // the previous row's stores have read buf
#pragma unroll 4
    for (int n = tid_now(); n < M2; n += T2) buf[pad(n)] = mulf2(xr[n], twiddle<-1>(n * kr, M));
    __syncthreads();
    fused::fft<M2, T2, -1>(buf, tid_now(), from_buf, to_buf);
    __syncthreads();
    for (int j = fused::fresh_tid(); j < npairs; j += NT) {
      const int pb = k1 == 0 ? (M2 - j) & (M2 - 1) : M2 - 1 - j;
      const int f = ka + M1 * j;
      const float2 w = pair_w(f, M);
      const Pair v = split_pair(sm[pad(j)], sm[ob + pad(pb)], w);
      const Pair g = split_pair(sm[2 * S + pad(j)], sm[2 * S + ob + pad(pb)], w);
      const float2* kh = khat + khat_block(h, k1, M1, M2) + j;
      const float2 kf = __ldg(kh), kg = __ldg(kh + M2);
      // this thread owns acc[j], acc[M2 + j] for every b: no barrier; set at b = 0 (no zero fill)
      float2 pf = mulcf2(v.f, g.f), pg = mulcf2(v.g, g.g);
      if (b > 0) {
        pf = pf + acc[j];
        pg = pg + acc[M2 + j];
      }
      acc[j] = pf;
      acc[M2 + j] = pg;  // f = M/2 (row 0, j = M2/2) is its own partner: both slots hold it
      const Pair d = merge_pair(mulcf2(kf, g.f), mulcf2(kg, g.g), w);
      sm[2 * S + pad(j)] = d.f;
      if (f != 0) sm[2 * S + ob + pad(pb)] = d.g;
      if (need_z) {
        const Pair z = merge_pair(mulf2(kf, v.f), mulf2(kg, v.g), w);
        sm[pad(j)] = z.f;
        if (f != 0) sm[ob + pad(pb)] = z.g;
      } else if (last) {
        merge_dk(j, pb, f, w);  // the V rows are free: dK̂'s inverse rides along with dV̂'s
      }
    }
    // G rows → Xg; V rows → Xv (Ẑ) when need_z, else after the last row → Xdk (dK̂)
    const bool dk_now = !need_z && last;
    inverse_to(grp < 2 && dk_now ? Xdk + h * int64_t(M) + int64_t(kr) * M2 : xr, own && (grp >= 2 || need_z || dk_now));
  }
  if (need_z) {  // the V rows held Ẑ: dK̂ takes one more inverse
    __syncthreads();  // the stores above have read buf
    for (int j = fused::fresh_tid(); j < npairs; j += NT) {
      const int pb = k1 == 0 ? (M2 - j) & (M2 - 1) : M2 - 1 - j;
      const int f = ka + M1 * j;
      merge_dk(j, pb, f, pair_w(f, M));
    }
    inverse_to(Xdk + h * int64_t(M) + int64_t(kr) * M2, own && grp < 2);
  }
}

}  // namespace strux::cuda::fourstep
