// The dense ks path (KsPath::dense; ks_dense.cu; private to src/cuda/ks): W expanded into the
// dense K (a*b*d x a*c*d) in the cuBLAS weight buffer, then one plain cuBLAS GEMM, for forward
// and backward_x, both layouts, float32 / float16 / bfloat16. Forced only (KsOptions::path): it
// does a*d times the FLOPs of the ks product, which pays only where a*d is tiny and one
// tensor-core GEMM with no transposition pass beats the ks paths (bench/NOTES-gpu-ks-scan.md
// "ks-dense"). backward_w stays on its own paths: a dense dK would cost a*d times the FLOPs and
// its a*d - 1 zero blocks would be thrown away.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "strux/cuda/common.hpp"  // DType

namespace strux::cuda::ks {

// The largest dense K the path expands: 2^28 elements (1 GiB in float32, 512 MiB in halves),
// so that every index of the expansion fits an int and M, N fit cuBLAS's int arguments.
constexpr int64_t kDenseMaxElems = int64_t(1) << 28;

// Whether the path applies: M*N = a^2*b*c*d^2 <= kDenseMaxElems and batch < 2^31 (cuBLAS int).
// Symmetric in b and c, so forward and backward_x apply together.
bool dense_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch);
// Bytes of the dense K in element size es: what blas_reserve must hold for this path.
int64_t dense_bytes(int64_t a, int64_t b, int64_t c, int64_t d, int64_t es);
// adjoint false: y = x K^T (batch-first, x (batch, N) -> y (batch, M)) or y = K x (batch-last);
// adjoint true: dx = dy K (batch-first, dy (batch, M) -> dx (batch, N)) or dx = K^T dy
// (batch-last). Pattern (a, b, c, d) of w (a, b, c, d) contiguous in both cases. Expands K into
// the weight buffer (blas_reserve(dense_bytes(...)) at plan construction), then one GEMM;
// launches only.
void dense_prod(const void* x, const void* w, void* y, DType dt, int64_t a, int64_t b, int64_t c,
                int64_t d, int64_t batch, bool batch_last, bool adjoint, cudaStream_t s);

}  // namespace strux::cuda::ks
