// Toeplitz family: BlockToeplitzPlan against float64 loops of the DESIGN.md formulas, LTI
// blocks, and FFTMatvec files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "strux/api/toeplitz.hpp"
#include "strux/toeplitz.hpp"
#include "toeplitz_ref.hpp"

namespace {

using strux::BlockToeplitzPlan;
using strux::ToeplitzLayout;
using strux::test::at;
using strux::test::ref_apply;
namespace fs = std::filesystem;

std::vector<double> randn(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> nd;
  std::vector<double> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

template <class T, class U>
std::vector<T> cast(const std::vector<U>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class A, class B>
double rel_err(const std::vector<A>& got, const std::vector<B>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

template <class T>
double tol() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

struct Size {
  int64_t nt, nd, nm, R;
};
const Size kSizes[] = {{1, 1, 1, 1}, {1, 3, 2, 2}, {7, 1, 1, 1}, {13, 3, 5, 1}, {13, 2, 3, 4},
                       {8, 4, 1, 3}, {5, 1, 6, 1}, {31, 2, 7, 2}};

template <class T>
void check_apply(const Size& z, ToeplitzLayout L, std::mt19937_64& rng) {
  const auto b = randn(size_t(z.nt * z.nd * z.nm), rng);
  const auto m = randn(size_t(z.nt * z.nm * z.R), rng);
  const auto d = randn(size_t(z.nt * z.nd * z.R), rng);
  const auto bt = cast<T>(b), mt = cast<T>(m), dt = cast<T>(d);
  BlockToeplitzPlan<T> plan(bt.data(), z.nt, z.nd, z.nm);
  std::vector<T> y(size_t(z.nt * z.nd * z.R)), x(size_t(z.nt * z.nm * z.R));
  plan.matvec(mt.data(), y.data(), z.R, L);
  plan.rmatvec(dt.data(), x.data(), z.R, L);
  // References from the rounded inputs, so that only the algorithm's error is measured.
  const auto want_y = ref_apply(cast<double>(cast<T>(b)), cast<double>(mt), z.nt, z.nd, z.nm, z.R, L, false);
  const auto want_x = ref_apply(cast<double>(cast<T>(b)), cast<double>(dt), z.nt, z.nd, z.nm, z.R, L, true);
  const std::string what = "Nt=" + std::to_string(z.nt) + " Nd=" + std::to_string(z.nd) +
                           " Nm=" + std::to_string(z.nm) + " R=" + std::to_string(z.R) + " " +
                           strux::toeplitz_layout_name(L);
  EXPECT_LT(rel_err(y, want_y), tol<T>()) << "matvec " << what;
  EXPECT_LT(rel_err(x, want_x), tol<T>()) << "rmatvec " << what;
}

TEST(ToeplitzPlan, MatvecAndAdjointMatchLoopsFloat64) {
  std::mt19937_64 rng(1);
  for (const Size& z : kSizes)
    for (auto L : {ToeplitzLayout::TimeMajor, ToeplitzLayout::SpaceMajor}) check_apply<double>(z, L, rng);
}

TEST(ToeplitzPlan, MatvecAndAdjointMatchLoopsFloat32) {
  std::mt19937_64 rng(2);
  for (const Size& z : kSizes)
    for (auto L : {ToeplitzLayout::TimeMajor, ToeplitzLayout::SpaceMajor}) check_apply<float>(z, L, rng);
}

TEST(ToeplitzPlan, SizesAndSpectrum) {
  std::vector<double> b = {1.0, 2.0, 3.0};  // Nt = 3, Nd = Nm = 1
  BlockToeplitzPlan<double> p(b.data(), 3, 1, 1);
  EXPECT_EQ(p.nfft(), 5);  // good_fft_size(2*3-1)
  EXPECT_EQ(p.nfreq(), 3);
  // DC term: sum of the series over nfft.
  EXPECT_NEAR(p.spectrum()[0].real(), 6.0 / 5.0, 1e-15);
  EXPECT_NEAR(p.spectrum()[0].imag(), 0.0, 1e-15);
}

TEST(ToeplitzPlan, GradBlocksMatchesLoop) {
  std::mt19937_64 rng(3);
  for (const Size& z : kSizes)
    for (auto L : {ToeplitzLayout::TimeMajor, ToeplitzLayout::SpaceMajor}) {
      const auto b = randn(size_t(z.nt * z.nd * z.nm), rng);
      const auto m = randn(size_t(z.nt * z.nm * z.R), rng);
      const auto dd = randn(size_t(z.nt * z.nd * z.R), rng);
      BlockToeplitzPlan<double> plan(b.data(), z.nt, z.nd, z.nm);
      std::vector<double> g(b.size());
      plan.grad_blocks(m.data(), dd.data(), g.data(), z.R, L);
      std::vector<double> want(b.size(), 0.0);
      for (int64_t k = 0; k < z.nt; ++k)
        for (int64_t i = k; i < z.nt; ++i)
          for (int64_t a = 0; a < z.nd; ++a)
            for (int64_t c = 0; c < z.nm; ++c)
              for (int64_t r = 0; r < z.R; ++r)
                want[size_t((k * z.nd + a) * z.nm + c)] +=
                    dd[at(L, z.nt, z.nd, z.R, i, a, r)] * m[at(L, z.nt, z.nm, z.R, i - k, c, r)];
      EXPECT_LT(rel_err(g, want), 1e-12) << "Nt=" << z.nt << " R=" << z.R;
    }
}

TEST(ToeplitzLti, MatchesExplicitPowers) {
  std::mt19937_64 rng(4);
  // (ns, nd, nm): both iteration sides (nd <= nm and nd > nm).
  for (auto [ns, nd, nm] : {std::tuple<int64_t, int64_t, int64_t>{3, 2, 4}, {4, 5, 2}, {1, 1, 1}}) {
    const int64_t nt = 6;
    auto A = randn(size_t(ns * ns), rng);
    for (auto& v : A) v *= 0.4;
    const auto B = randn(size_t(ns * nm), rng), C = randn(size_t(nd * ns), rng),
               D = randn(size_t(nd * nm), rng);
    std::vector<double> got(size_t(nt * nd * nm));
    strux::lti_blocks<double>(A.data(), B.data(), C.data(), D.data(), ns, nd, nm, nt, got.data());
    std::vector<double> P(size_t(ns * ns), 0.0), want(got.size(), 0.0);  // P = A^t
    for (int64_t i = 0; i < ns; ++i) P[size_t(i * ns + i)] = 1.0;
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t a = 0; a < nd; ++a)
        for (int64_t c = 0; c < nm; ++c) {
          double s = t == 0 ? D[size_t(a * nm + c)] : 0.0;
          for (int64_t k = 0; k < ns; ++k)
            for (int64_t l = 0; l < ns; ++l) s += C[size_t(a * ns + k)] * P[size_t(k * ns + l)] * B[size_t(l * nm + c)];
          want[size_t((t * nd + a) * nm + c)] = s;
        }
      std::vector<double> Q(P.size(), 0.0);
      for (int64_t i = 0; i < ns; ++i)
        for (int64_t j = 0; j < ns; ++j)
          for (int64_t k = 0; k < ns; ++k) Q[size_t(i * ns + j)] += P[size_t(i * ns + k)] * A[size_t(k * ns + j)];
      P = Q;
    }
    EXPECT_LT(rel_err(got, want), 1e-13) << "ns=" << ns << " nd=" << nd << " nm=" << nm;
    // The factory builds the same operator.
    auto plan = BlockToeplitzPlan<double>::from_lti(A.data(), B.data(), C.data(), nullptr, ns, nd, nm, nt);
    EXPECT_EQ(plan.nt(), nt);
    EXPECT_EQ(plan.nd(), nd);
    EXPECT_EQ(plan.nm(), nm);
  }
}

TEST(ToeplitzPlan, BadArgumentsNameTheArgument) {
  std::vector<double> b(4, 1.0), x(4), y(4);
  auto expect_msg = [](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no exception, expected one naming " << needle;
    } catch (const strux::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { BlockToeplitzPlan<double>(b.data(), 0, 1, 1); }, "'Nt'");
  expect_msg([&] { BlockToeplitzPlan<double>(b.data(), 1, 0, 1); }, "'Nd'");
  expect_msg([&] { BlockToeplitzPlan<double>(b.data(), 1, 1, -2); }, "'Nm'");
  expect_msg([&] { BlockToeplitzPlan<double>(nullptr, 1, 1, 1); }, "'blocks'");
  expect_msg([&] { strux::parse_toeplitz_layout("tosi"); }, "'layout'");
  BlockToeplitzPlan<double> p(b.data(), 4, 1, 1);
  expect_msg([&] { p.matvec(x.data(), y.data(), 0); }, "'R'");
  expect_msg([&] { p.matvec(nullptr, y.data(), 1); }, "'m'");
  expect_msg([&] { p.rmatvec(x.data(), nullptr, 1); }, "'m'");
  EXPECT_EQ(strux::parse_toeplitz_layout("space-major"), ToeplitzLayout::SpaceMajor);
}

// ---- files -----------------------------------------------------------------------------------

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("strux_toeplitz_" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(ToeplitzFiles, MetaParsingIsLenient) {
  TempDir tmp;
  {
    std::ofstream f(tmp.path / "meta_adj");
    f << "  3\r\n4 \r\n\r\n5\r\nadj/vec_\r\n.h5\r\n1\r\n0\r\n1\r\n";  // CRLF, blank line, no checksum
  }
  const auto m = strux::read_fftmatvec_meta(tmp.path.string());
  EXPECT_EQ(m.nd, 3);
  EXPECT_EQ(m.nm, 4);
  EXPECT_EQ(m.nt, 5);
  EXPECT_EQ(m.prefix, "adj/vec_");
  EXPECT_EQ(m.checksum, 0);
  {
    std::ofstream f(tmp.path / "meta_adj");
    f << "3\nfour\n5\np_\n.h5\n1\n0\n1\n0\n";
  }
  try {
    strux::read_fftmatvec_meta(tmp.path.string());
    ADD_FAILURE() << "expected a ValueError";
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("meta_adj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Nm"), std::string::npos) << e.what();
  }
  EXPECT_THROW(strux::read_fftmatvec_meta((tmp.path / "nothing").string()), strux::ValueError);
}

#ifdef STRUX_HAVE_HDF5
TEST(ToeplitzFiles, MatrixRoundTripAndMatvec) {
  TempDir tmp;
  std::mt19937_64 rng(5);
  const int64_t nt = 7, nd = 3, nm = 4;
  const auto b = randn(size_t(nt * nd * nm), rng);
  for (std::string prefix : {"adj/vec_", "F_"}) {
    const fs::path dir = tmp.path / ("m_" + std::to_string(prefix.size()));
    strux::write_fftmatvec(dir.string(), b.data(), nt, nd, nm, prefix);
    strux::FFTMatvecMeta meta;
    const auto got = strux::read_fftmatvec(dir.string(), &meta);
    EXPECT_EQ(got, b);
    EXPECT_EQ(meta.nd, nd);
    EXPECT_EQ(meta.prefix, prefix);
  }
  // A missing block row names the file it looked for.
  fs::remove(tmp.path / "m_2" / "F_000001.h5");
  try {
    strux::read_fftmatvec((tmp.path / "m_2").string());
    ADD_FAILURE() << "expected a ValueError";
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("F_000001.h5"), std::string::npos) << e.what();
  }
}

TEST(ToeplitzFiles, VectorRoundTripAndWrongSize) {
  TempDir tmp;
  std::mt19937_64 rng(6);
  const auto x = randn(12, rng);
  const std::string p = (tmp.path / "v.h5").string();
  strux::write_vector_file(p, x.data(), 3, 4, strux::VectorSpace::Obs);
  const auto v = strux::read_vector_file(p);
  EXPECT_EQ(v.n, 3);
  EXPECT_EQ(v.nt, 4);
  EXPECT_EQ(v.space, strux::VectorSpace::Obs);
  EXPECT_EQ(v.data, x);
  // A matrix row file of the wrong length is reported with its name.
  std::vector<double> b(2 * 1 * 3, 1.0);
  strux::write_fftmatvec((tmp.path / "mat").string(), b.data(), 2, 1, 3, "r_");
  {
    std::ofstream f(tmp.path / "mat" / "meta_adj");
    f << "1\n3\n3\nr_\n.h5\n1\n0\n1\n0\n";  // claims Nt = 3: the file has 6 values, not 9
  }
  try {
    strux::read_fftmatvec((tmp.path / "mat").string());
    ADD_FAILURE() << "expected a ValueError";
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("r_000000.h5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(strux::read_vector_file((tmp.path / "absent.h5").string()), strux::ValueError);
}
#endif

}  // namespace

// ---- precision per phase --------------------------------------------------------------------

namespace {

using strux::ToeplitzPrecision;
using K = strux::ToeplitzPrecisionKind;

// Every candidate configuration, both directions, float64 vectors: within the model's bound and,
// where a precision is lowered, of the model's size (not silently run in double).
TEST(ToeplitzPrecision, EveryCandidateWithinItsBound) {
  std::mt19937_64 rng(3);
  const int64_t nt = 30, nd = 5, nm = 12, R = 2;
  const auto b = randn(size_t(nt * nd * nm), rng);
  const auto m = randn(size_t(nt * nm * R), rng), d = randn(size_t(nt * nd * R), rng);
  ToeplitzPrecision dbl;
  dbl.broadcast = dbl.fft = dbl.product = dbl.ifft = dbl.reduce = K::Double;
  for (const auto& c : strux::toeplitz_precision_candidates(false)) {
    for (const ToeplitzLayout L : {ToeplitzLayout::TimeMajor, ToeplitzLayout::SpaceMajor}) {
      BlockToeplitzPlan<double> plan(b.data(), nt, nd, nm, c);
      std::vector<double> y(size_t(nt * nd * R)), x(size_t(nt * nm * R));
      plan.matvec(m.data(), y.data(), R, L);
      plan.rmatvec(d.data(), x.data(), R, L);
      const double e1 = rel_err(y, ref_apply(b, m, nt, nd, nm, R, L, false));
      const double e2 = rel_err(x, ref_apply(b, d, nt, nd, nm, R, L, true));
      const double tol = strux::toeplitz_error_estimate(c, true, nt, std::max(nd, nm)) +
                         strux::toeplitz_error_estimate(dbl, true, nt, std::max(nd, nm));
      const std::string what = strux::describe_toeplitz_precision(c, true);
      EXPECT_LE(e1, tol) << what;
      EXPECT_LE(e2, tol) << what;
      const double rms = std::min(strux::toeplitz_error_rms(c, true, nt, nm), strux::toeplitz_error_rms(c, true, nt, nd));
      if (rms > 1e-12) EXPECT_GE(std::min(e1, e2), rms / 8) << what;
    }
  }
}

TEST(ToeplitzPrecision, ChoiceAndErrors) {
  // A loose tolerance takes a 16-bit F̂ (fewest bytes); a tight one double products.
  EXPECT_NE(strux::toeplitz_choose_precision(1e-2, true, 100, 10, 500, 1, false).fhat, strux::ToeplitzStorage::Auto);
  EXPECT_EQ(strux::toeplitz_choose_precision(1e-12, true, 100, 10, 500, 1, false).product, K::Double);
  EXPECT_THROW(strux::toeplitz_choose_precision(1e-30, true, 100, 10, 500, 1, false), strux::ValueError);
  ToeplitzPrecision bad;
  bad.fhat = strux::ToeplitzStorage::Float16;
  bad.product = K::Double;
  EXPECT_THROW(strux::resolve_toeplitz_precision(bad, true), strux::ValueError);
  EXPECT_THROW(strux::parse_toeplitz_precision("half", "precision.fft"), strux::ValueError);
  // The plain precision keeps the plain plan (spectrum available); a 16-bit one has none.
  const std::vector<float> b(4 * 2 * 3, 1.0f);
  EXPECT_NO_THROW(BlockToeplitzPlan<float>(b.data(), 4, 2, 3, ToeplitzPrecision{}).spectrum());
  ToeplitzPrecision h;
  h.fhat = strux::ToeplitzStorage::BFloat16;
  BlockToeplitzPlan<float> half(b.data(), 4, 2, 3, h);
  EXPECT_THROW(half.spectrum(), strux::ValueError);
  EXPECT_EQ(half.spectrum_bytes(), half.nfreq() * 2 * 3 * 4);
}

// The operator API passes the precision to the CPU plan (a float16 F̂ here), within the bound.
TEST(ToeplitzPrecision, OperatorApi) {
  std::mt19937_64 rng(9);
  const int64_t nt = 20, nd = 4, nm = 9;
  auto b = randn(size_t(nt * nd * nm), rng), m = randn(size_t(nt * nm), rng);
  std::vector<double> d(size_t(nt * nd));
  strux::op::BlockToeplitzProblem p{nt, nd, nm, 1, ToeplitzLayout::TimeMajor, strux::DType::f64};
  p.precision.fhat = strux::ToeplitzStorage::Float16;
  strux::op::BlockToeplitz F(p);
  F.set_blocks(strux::View(b.data(), {nt, nd, nm}));
  EXPECT_NE(F.describe().find("float16"), std::string::npos) << F.describe();
  F.forward({strux::View(m.data(), {nt, nm}), strux::View(d.data(), {nt, nd})});
  const double e = rel_err(d, ref_apply(b, m, nt, nd, nm, 1, ToeplitzLayout::TimeMajor, false));
  EXPECT_LE(e, strux::toeplitz_error_estimate(p.precision, true, nt, nm));
  EXPECT_GE(e, strux::toeplitz_error_rms(p.precision, true, nt, nm) / 8);  // the float16 F̂ is really used
}

}  // namespace
