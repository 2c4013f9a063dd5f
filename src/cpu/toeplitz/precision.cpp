// Precision per phase of the block Toeplitz product: names, resolution, the error model, the
// byte-count cost model and the automatic choice (the one place a precision is chosen).
// Derivation and measurements: bench/NOTES-toeplitz-precision.md.
#include <algorithm>
#include <cmath>

#include "cpu/fft.hpp"
#include "strux/toeplitz.hpp"

namespace strux {

using K = ToeplitzPrecisionKind;

ToeplitzPrecisionKind parse_toeplitz_precision(const std::string& s, const char* arg) {
  if (s == "auto") return K::Auto;
  if (s == "single") return K::Single;
  if (s == "double") return K::Double;
  throw ValueError(msg("argument '", arg, "': expected one of 'auto', 'single', 'double', got '", s, "'"));
}

const char* toeplitz_precision_name(ToeplitzPrecisionKind k) {
  return k == K::Single ? "single" : k == K::Double ? "double" : "auto";
}

ToeplitzStorage parse_toeplitz_storage(const std::string& s) {
  if (s == "auto") return ToeplitzStorage::Auto;
  if (s == "bfloat16") return ToeplitzStorage::BFloat16;
  if (s == "float16") return ToeplitzStorage::Float16;
  throw ValueError(msg("argument 'precision.fhat': expected one of 'auto', 'bfloat16', 'float16', got '", s, "'"));
}

const char* toeplitz_storage_name(ToeplitzStorage k) {
  return k == ToeplitzStorage::BFloat16 ? "bfloat16" : k == ToeplitzStorage::Float16 ? "float16" : "auto";
}

ToeplitzPrecision resolve_toeplitz_precision(const ToeplitzPrecision& p, bool dbl) {
  const K v = dbl ? K::Double : K::Single;
  const auto r = [&](K k) { return k == K::Auto ? v : k; };
  ToeplitzPrecision q = p;
  q.broadcast = r(p.broadcast), q.fft = r(p.fft), q.ifft = r(p.ifft), q.reduce = r(p.reduce);
  if (p.fhat != ToeplitzStorage::Auto) {
    check_arg(p.product != K::Double, "precision.product",
              "expected 'single' or 'auto' with a ", toeplitz_storage_name(p.fhat),
              " F̂ (its products accumulate in float32), got 'double'");
    q.product = K::Single;
  } else {
    q.product = r(p.product);
  }
  return q;
}

bool is_plain_toeplitz_precision(const ToeplitzPrecision& p, bool dbl) {
  const ToeplitzPrecision q = resolve_toeplitz_precision(p, dbl);
  const K v = dbl ? K::Double : K::Single;
  return q.broadcast == v && q.fft == v && q.product == v && q.ifft == v && q.reduce == v &&
         q.fhat == ToeplitzStorage::Auto;
}

std::string describe_toeplitz_precision(const ToeplitzPrecision& p, bool dbl) {
  const ToeplitzPrecision q = resolve_toeplitz_precision(p, dbl);
  const char* fh = q.fhat != ToeplitzStorage::Auto ? toeplitz_storage_name(q.fhat)
                   : q.product == K::Double        ? "complex128"
                                                   : "complex64";
  return msg("broadcast ", toeplitz_precision_name(q.broadcast), ", fft ", toeplitz_precision_name(q.fft),
             ", product ", toeplitz_precision_name(q.product), " (F̂ ", fh, "), ifft ",
             toeplitz_precision_name(q.ifft), ", reduce ", toeplitz_precision_name(q.reduce));
}

namespace {

double unit_roundoff(K k) { return k == K::Double ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24); }

double storage_roundoff(const ToeplitzPrecision& q) {
  if (q.fhat == ToeplitzStorage::BFloat16) return std::ldexp(1.0, -8);
  if (q.fhat == ToeplitzStorage::Float16) return std::ldexp(1.0, -11);
  return unit_roundoff(q.product);
}

// The bound's safety factor over the root-mean-square model (bench/NOTES-toeplitz-precision.md
// #calibration: on random data the model is within a factor 2 of the measured error).
constexpr double kSafety = 4.0;

}  // namespace

double toeplitz_error_rms(const ToeplitzPrecision& p, bool dbl, int64_t nt, int64_t n_in) {
  check_positive(nt, "Nt");
  check_positive(n_in, "n_in");
  const ToeplitzPrecision q = resolve_toeplitz_precision(p, dbl);
  const double L = std::log2(double(std::max<int64_t>(2, cpu::good_fft_size(2 * nt - 1))));
  // The input as given is exact (rounding it to its own dtype costs nothing); the output is
  // rounded to the vectors' dtype whatever the reduce precision.
  const double ub = dbl && q.broadcast == K::Single ? unit_roundoff(K::Single) : 0.0;
  const double ur = unit_roundoff(dbl ? q.reduce : K::Single);
  // Independent rounding errors add in root mean square. Coefficients fitted on random data:
  // a transform's error grows like sqrt(log2 nfft), a blocked BLAS sum's like sqrt(n_in) with
  // a small factor, a rounded F̂ entry's relative error is about 0.45 u rms.
  const double t[] = {0.6 * ub,
                      0.5 * ur,
                      0.65 * unit_roundoff(q.fft) * std::sqrt(1 + L),
                      0.45 * storage_roundoff(q),
                      // F̂ is computed in single from float32 blocks unless the product is double
                      0.65 * unit_roundoff(dbl || q.product == K::Double ? K::Double : K::Single) * std::sqrt(1 + L),
                      unit_roundoff(q.product) * (0.6 + 0.12 * std::sqrt(double(n_in))),
                      0.65 * unit_roundoff(q.ifft) * std::sqrt(1 + L)};
  double e = 0;
  for (double v : t) e += v * v;
  return std::sqrt(e);
}

double toeplitz_error_estimate(const ToeplitzPrecision& p, bool dbl, int64_t nt, int64_t n_in) {
  return kSafety * toeplitz_error_rms(p, dbl, nt, n_in);
}

double toeplitz_product_bytes(const ToeplitzPrecision& p, bool dbl, int64_t nt, int64_t nd, int64_t nm, int64_t R) {
  const ToeplitzPrecision q = resolve_toeplitz_precision(p, dbl);
  const double nfft = double(std::max<int64_t>(2, cpu::good_fft_size(2 * nt - 1))), nf = nfft / 2 + 1;
  const double sv = dbl ? 8 : 4;
  const auto sz = [](K k) { return k == K::Double ? 8.0 : 4.0; };
  const double sF = q.fhat != ToeplitzStorage::Auto ? 4.0 : 2 * sz(q.product);
  const double in = double(nm) * double(R), out = double(nd) * double(R);  // columns (matvec)
  // input read; FFT: padded series written and read, spectrum written; product: F̂, spectra in
  // and out; IFFT: spectrum read, series written and read; output written.
  return double(nt) * in * sv + nfft * in * 2 * sz(q.fft) + nf * in * 2 * sz(q.fft) +
         nf * double(nd) * double(nm) * sF + nf * (in + out) * 2 * sz(q.product) + nf * out * 2 * sz(q.ifft) +
         nfft * out * 2 * sz(q.ifft) + double(nt) * out * sv;
}

std::vector<ToeplitzPrecision> toeplitz_precision_candidates(bool /*cuda_only*/) {
  std::vector<ToeplitzPrecision> out;
  const K ks[] = {K::Double, K::Single};
  const std::pair<K, ToeplitzStorage> products[] = {{K::Double, ToeplitzStorage::Auto},
                                                    {K::Single, ToeplitzStorage::Auto},
                                                    {K::Single, ToeplitzStorage::Float16},
                                                    {K::Single, ToeplitzStorage::BFloat16}};
  for (K f : ks)
    for (const auto& [pr, st] : products)
      for (K i : ks) {
        ToeplitzPrecision c;
        c.fft = f, c.product = pr, c.fhat = st, c.ifft = i;
        out.push_back(c);
      }
  return out;
}

ToeplitzPrecision toeplitz_choose_precision(double tol, bool dbl, int64_t nt, int64_t nd, int64_t nm, int64_t R,
                                            bool cuda_only) {
  check_arg(std::isfinite(tol) && tol > 0, "tol", "expected a relative error tolerance > 0, got ", tol);
  const ToeplitzPrecision* best = nullptr;
  double best_bytes = 0, best_err = 0;
  const auto cands = toeplitz_precision_candidates(cuda_only);
  for (const auto& c : cands) {
    const double err = std::max(toeplitz_error_estimate(c, dbl, nt, nm), toeplitz_error_estimate(c, dbl, nt, nd));
    if (err > tol) continue;
    double b = toeplitz_product_bytes(c, dbl, nt, nd, nm, R);
    if (cuda_only) {
      const double nf = double(cpu::good_fft_size(2 * nt - 1) / 2 + 1);
      const auto sz = [](K k) { return k == K::Double ? 8.0 : 4.0; };
      // The CUDA 16-bit F̂ product streams F̂ once per right-hand side (no tiled kernel for it yet).
      if (c.fhat != ToeplitzStorage::Auto) b += double(R - 1) * nf * double(nd) * double(nm) * 4.0;
      // Phases in different precisions: the spectra are converted between plans (read + write).
      if (c.fft != c.product) b += nf * double(nm * R) * 2 * (sz(c.fft) + sz(c.product));
      if (c.ifft != c.product) b += nf * double(nd * R) * 2 * (sz(c.ifft) + sz(c.product));
    }
    if (!best || b < best_bytes || (b == best_bytes && err < best_err)) best = &c, best_bytes = b, best_err = err;
  }
  if (!best) {
    ToeplitzPrecision all_double;
    all_double.broadcast = all_double.fft = all_double.product = all_double.ifft = all_double.reduce = K::Double;
    throw ValueError(msg("argument 'tol': no configuration is predicted to reach a relative error of ", tol,
                         " (the most accurate, all double, is predicted at ",
                         std::max(toeplitz_error_estimate(all_double, dbl, nt, nm),
                                  toeplitz_error_estimate(all_double, dbl, nt, nd)),
                         ")"));
  }
  return *best;
}

}  // namespace strux
