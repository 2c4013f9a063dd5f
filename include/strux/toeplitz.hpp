// strux toeplitz: block lower-triangular Toeplitz (BLTT) operators, F m and F* d, on the CPU.
//
// Contract (DESIGN.md): blocks is (Nt, Nd, Nm) row-major; block (i, j) of F (Nt*Nd x Nt*Nm) is
// blocks[i-j] for i >= j, else 0.
//   matvec   d[i] = sum_{j<=i} blocks[i-j] @ m[j]          m (Nt, Nm[, R]) -> d (Nt, Nd[, R])
//   rmatvec  m[j] = sum_{i>=j} blocks[i-j]^T @ d[i]        d (Nt, Nd[, R]) -> m (Nt, Nm[, R])
// Layouts of the vectors (blocks are always (Nt, Nd, Nm)):
//   TimeMajor  m (Nt, Nm[, R]), d (Nt, Nd[, R])      (TOSI: time outer, space inner)
//   SpaceMajor m (Nm, Nt[, R]), d (Nd, Nt[, R])      (SOTI, the order of FFTMatvec files)
//
// Algorithm (Venkat et al. 2024, arXiv:2407.13066): embed each Toeplitz series in a circulant of
// length nfft = good_fft_size(2 Nt - 1) (the smallest FFT-friendly length with no wrap-around
// into the first Nt outputs), so F becomes block diagonal in frequency: per frequency f a dense
// complex (Nd x Nm) matrix Fhat[f]. A matvec is: real FFT of the zero-padded input series, one
// complex GEMV (GEMM when R > 1) per frequency, inverse FFT, keep the first Nt samples.
// The adjoint uses the SAME Fhat with CblasConjTrans (no transposed copy is stored).
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strux/core.hpp"

namespace strux {

enum class ToeplitzLayout { TimeMajor, SpaceMajor };

// "time-major" / "space-major"; anything else is a ValueError naming argument 'layout'.
ToeplitzLayout parse_toeplitz_layout(const std::string& s);
const char* toeplitz_layout_name(ToeplitzLayout layout);

// ---- precision per phase (Venkat et al., SC'25 workshops, arXiv:2508.10202) ---------------------
// A product runs in phases: the input vector (as broadcast by the distributed operator), the
// forward FFT, the per-frequency product with F̂, the inverse FFT, and the output (as reduced by
// the distributed operator). Each phase computes in single (float32) or double (float64); Auto
// is the precision of the vectors' dtype. The local operator honours broadcast and reduce as a
// rounding of the input and of the output, so a distributed product with the same struct is the
// serial one. F̂ is stored as complex in the product's precision (complex64 / complex128), or as
// (re, im) pairs of bfloat16 or float16 (half the bytes of complex64), scaled by a power of two
// so its largest part sits near the top of the 16-bit range, with float32 accumulation (the
// product is then single). Error model and cost model: toeplitz_error_estimate and
// toeplitz_product_bytes below; bench/NOTES-toeplitz-precision.md has the derivation and the
// measurements.
enum class ToeplitzPrecisionKind { Auto, Single, Double };
enum class ToeplitzStorage { Auto, BFloat16, Float16 };

struct ToeplitzPrecision {
  ToeplitzPrecisionKind broadcast = ToeplitzPrecisionKind::Auto;
  ToeplitzPrecisionKind fft = ToeplitzPrecisionKind::Auto;
  ToeplitzPrecisionKind product = ToeplitzPrecisionKind::Auto;
  ToeplitzPrecisionKind ifft = ToeplitzPrecisionKind::Auto;
  ToeplitzPrecisionKind reduce = ToeplitzPrecisionKind::Auto;
  ToeplitzStorage fhat = ToeplitzStorage::Auto;
};

// "single" / "double" / "auto" (ValueError naming `arg` otherwise), and the names back.
ToeplitzPrecisionKind parse_toeplitz_precision(const std::string& s, const char* arg);
const char* toeplitz_precision_name(ToeplitzPrecisionKind k);
// "auto" (complex in the product's precision) / "bfloat16" / "float16".
ToeplitzStorage parse_toeplitz_storage(const std::string& s);
const char* toeplitz_storage_name(ToeplitzStorage k);

// Auto replaced by the vectors' precision (double_vectors) and a half F̂'s product by Single;
// ValueError naming 'precision.product' for a half F̂ with a double product.
ToeplitzPrecision resolve_toeplitz_precision(const ToeplitzPrecision& p, bool double_vectors);
// Every phase in the vectors' precision and F̂ complex of that precision (the plain product).
bool is_plain_toeplitz_precision(const ToeplitzPrecision& p, bool double_vectors);
// "fft single, product single (F̂ bfloat16), ifft double, ..." (resolved).
std::string describe_toeplitz_precision(const ToeplitzPrecision& p, bool double_vectors);

// Predicted relative error ||y - y_exact|| / ||y_exact|| of one product (either direction) with
// Nt steps and n_in = Nm (matvec) or Nd (adjoint) terms per frequency, for inputs without heavy
// cancellation (||F x|| not much below ||F|| ||x||). toeplitz_error_rms is the root-mean-square
// model
//   sqrt( (0.6 u_b)^2 + (0.5 u_r)^2 + (0.65 u_f)^2 (1 + log2 nfft) + (0.45 u_F)^2
//         + (0.65 u_h)^2 (1 + log2 nfft) + (u_p (0.6 + 0.12 sqrt(n_in)))^2 + (0.65 u_i)^2 (1 + log2 nfft) )
// u_b, u_f, u_p, u_i, u_r: unit roundoffs of the phases (2^-24 single, 2^-53 double; u_b = 0 when
// the input is not rounded, u_r that of the vectors' dtype at least); u_F of F̂'s storage (u_p
// for complex, 2^-8 bfloat16, 2^-11 float16); u_h of F̂'s computation (double from float64
// blocks or for a double product, else single). toeplitz_error_estimate is the bound: 4 times it.
double toeplitz_error_rms(const ToeplitzPrecision& p, bool double_vectors, int64_t nt, int64_t n_in);
double toeplitz_error_estimate(const ToeplitzPrecision& p, bool double_vectors, int64_t nt, int64_t n_in);
// Bytes one product moves through memory (vectors, spectra, F̂), the cost model of the choice.
double toeplitz_product_bytes(const ToeplitzPrecision& p, bool double_vectors, int64_t nt, int64_t nd, int64_t nm,
                              int64_t R);
// The configurations toeplitz_choose_precision considers: fft and ifft single or double, the
// product double (complex128 F̂), single (complex64 F̂), or single with a bfloat16 / float16
// F̂; broadcast and reduce Auto (the same on CUDA, which runs them all; the argument is kept for
// a device that cannot).
std::vector<ToeplitzPrecision> toeplitz_precision_candidates(bool cuda_only);
// The configuration of least toeplitz_product_bytes whose estimate (for both directions) is
// <= tol, the more accurate one on a tie. ValueError naming 'tol' when none meets it. With
// cuda_only, a 16-bit F̂ is charged once per right-hand side (the CUDA kernels for it stream F̂
// per right-hand side) and phases in another precision than the product the conversion of the
// spectra (CUDA converts them between plans in separate passes).
ToeplitzPrecision toeplitz_choose_precision(double tol, bool double_vectors, int64_t nt, int64_t nd, int64_t nm,
                                            int64_t R, bool cuda_only);

// T = float or double. Thread-safe for concurrent const calls (each call takes the plan's
// scratch if free, or allocates its own).
template <class T>
class BlockToeplitzPlan {
 public:
  // blocks: (nt, nd, nm) row-major; read once (Fhat is computed here and the pointer not kept).
  BlockToeplitzPlan(const T* blocks, int64_t nt, int64_t nd, int64_t nm);
  // The same with a precision per phase and F̂'s storage (see ToeplitzPrecision); the vectors
  // stay of type T. Every precision but the plain one (is_plain_toeplitz_precision) runs the
  // mixed path (cpu/toeplitz/mixed.hpp).
  BlockToeplitzPlan(const T* blocks, int64_t nt, int64_t nd, int64_t nm, const ToeplitzPrecision& precision);

  // From an LTI system x_t = A x_{t-1} + B u_t, y_t = C x_t (+ D u_t):
  // blocks[t] = C A^t B (+ D at t = 0). A (ns, ns), B (ns, nm), C (nd, ns), D (nd, nm) or null.
  static BlockToeplitzPlan from_lti(const T* A, const T* B, const T* C, const T* D, int64_t ns,
                                    int64_t nd, int64_t nm, int64_t nt);

  BlockToeplitzPlan(BlockToeplitzPlan&&) noexcept;
  BlockToeplitzPlan& operator=(BlockToeplitzPlan&&) noexcept;
  ~BlockToeplitzPlan();

  int64_t nt() const;
  int64_t nd() const;
  int64_t nm() const;
  int64_t nfft() const;   // circulant length along time
  int64_t nfreq() const;  // nfft / 2 + 1 stored frequencies (real input: half spectrum)

  // Fhat, (nfreq, nd, nm) row-major: rfft(blocks, n = nfft, axis = 0) / nfft.
  // (The 1/nfft of the inverse FFT is folded in here, so no pass over the output is needed.)
  // ValueError when F̂ is stored in another type (a mixed precision).
  const std::complex<T>* spectrum() const;
  // The resolved precision (no Auto left).
  const ToeplitzPrecision& precision() const;
  // Bytes of F̂ as stored.
  int64_t spectrum_bytes() const;

  // d = F m. m and d are C-contiguous in `layout` with R right-hand sides (R >= 1; for R == 1
  // the trailing axis is absent, same memory).
  void matvec(const T* m, T* d, int64_t R = 1,
              ToeplitzLayout layout = ToeplitzLayout::TimeMajor) const;
  // m = F^T d (the adjoint; F is real).
  void rmatvec(const T* d, T* m, int64_t R = 1,
               ToeplitzLayout layout = ToeplitzLayout::TimeMajor) const;

  // Gradient of <dd, F m> with respect to blocks (the backward of matvec for the operator data):
  // dblocks[k] = sum_r sum_{i>=k} dd[i, :, r] m[i-k, :, r]^T, (nt, nd, nm) row-major.
  // Computed as a cross-correlation with FFTs. (The gradient for m is rmatvec(dd).)
  void grad_blocks(const T* m, const T* dd, T* dblocks, int64_t R = 1,
                   ToeplitzLayout layout = ToeplitzLayout::TimeMajor) const;

  struct Impl;

 private:
  explicit BlockToeplitzPlan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// blocks[t] = C A^t B (+ D at t = 0) into `blocks` (nt, nd, nm), with BLAS. D may be null.
// Iterates the cheaper side: Y_t = Y_{t-1} A from Y_0 = C when nd <= nm (then one GEMM with B),
// else X_t = A X_{t-1} from X_0 = B (then C X_t per step).
template <class T>
void lti_blocks(const T* A, const T* B, const T* C, const T* D, int64_t ns, int64_t nd, int64_t nm,
                int64_t nt, T* blocks);

// ---- files in the FFTMatvec format (HDF5; needs a build with STRUX_HAVE_HDF5) ------------------
// A matrix is a directory with a text file `meta_adj` (nine lines: Nd, Nm, Nt, prefix, extension
// ".h5", reindexed = 1, is_p2q, reverse_dof = 1, checksum) and one HDF5 file per block row,
// <dir>/<prefix><row as 6 digits><extension>, dataset "vec" of Nm*Nt doubles,
// vec[m*Nt + t] = blocks[t, row, m], attributes reindex = 1, n_param = Nm, param_steps = Nt.
// Reading is lenient: blank lines and surrounding whitespace are ignored, the checksum line may be
// missing, the prefix may hold a relative folder ("adj/vec_"), files named by a bare prefix are
// also looked for in an `adj/` folder, and `dir` may be the matrix root holding `binary/meta_adj`.

bool have_hdf5();

struct FFTMatvecMeta {
  int64_t nd = 0, nm = 0, nt = 0;
  std::string prefix, extension = ".h5";
  int64_t reindexed = 1, is_p2q = 0, reverse_dof = 1, checksum = 0;
  std::string meta_path;  // the meta_adj file that was read
};

// Parses meta_adj (no HDF5 needed). ValueError naming the file on a missing file or bad line.
FFTMatvecMeta read_fftmatvec_meta(const std::string& dir);

// Reads all block rows: returns blocks (nt, nd, nm) float64; fills *meta if given.
std::vector<double> read_fftmatvec(const std::string& dir, FFTMatvecMeta* meta = nullptr);
// Only block rows [row0, row1) and columns [col0, col1) (row1, col1 = -1: to the end): returns
// (nt, row1 − row0, col1 − col0), opening only those rows' files (a rank's part of a grid).
std::vector<double> read_fftmatvec_part(const std::string& dir, int64_t row0, int64_t row1, int64_t col0,
                                        int64_t col1, FFTMatvecMeta* meta = nullptr);

// Writes meta_adj and the block-row files (folders are created). prefix may hold a relative
// folder: the default "adj/vec_" is the layout of FFTMatvec's own data.
void write_fftmatvec(const std::string& dir, const double* blocks, int64_t nt, int64_t nd,
                     int64_t nm, const std::string& prefix = "adj/vec_", int64_t is_p2q = 0,
                     int64_t checksum = 0);

enum class VectorSpace { Param, Obs };

struct VectorFile {
  std::vector<double> data;  // space-major (n, nt)
  int64_t n = 0, nt = 0;
  VectorSpace space = VectorSpace::Param;
};

// Dataset "vec" (space-major) with n_param/param_steps (Param) or n_obs/obs_steps (Obs), reindex=1.
VectorFile read_vector_file(const std::string& path);
void write_vector_file(const std::string& path, const double* x, int64_t n, int64_t nt,
                       VectorSpace space);

}  // namespace strux
