// The one include of the C BLAS interface. OpenBLAS and the netlib reference CBLAS both take
// `int` sizes in their LP64 builds (OpenBLAS calls it blasint); callers convert with blas_int
// after checking the size fits (ValueError otherwise).
#pragma once

#include <cblas.h>

namespace strux::cpu {
using blas_int = int;
}  // namespace strux::cpu
