// The operator API (<strux/strux.hpp>) on a CUDA device: every operator's forward and backward
// against the same operator on the CPU (itself checked against float64 loops in test_api.cpp),
// float32 and float64, on a non-default stream; forced solvers; the caller's workspace; errors.
// Compiled with the CUDA backend only; each test skips when no GPU is present.
#ifdef STRUX_HAVE_CUDA

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api_test_util.hpp"
#include "strux/strux.hpp"

namespace {

using strux::Device;
using strux::DType;
using strux::View;
using cd = std::complex<double>;
namespace op = strux::op;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

void ok(cudaError_t e) { ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e); }

std::mt19937_64& rng() {
  static std::mt19937_64 g(77);
  return g;
}

// One array on the host and on the GPU.
template <class T>
struct Buf {
  std::vector<T> h;
  void* d = nullptr;
  explicit Buf(std::vector<T> v) : h(std::move(v)) {
    ok(cudaMalloc(&d, std::max<size_t>(1, h.size()) * sizeof(T)));
    ok(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  Buf(const Buf&) = delete;
  ~Buf() { cudaFree(d); }
  View cpu(std::initializer_list<int64_t> s) { return View(h.data(), s); }
  View gpu(std::initializer_list<int64_t> s) { return View(static_cast<T*>(d), s, Device::cuda(0)); }
  std::vector<T> get() const {
    std::vector<T> out(h.size());
    cudaDeviceSynchronize();
    cudaMemcpy(out.data(), d, h.size() * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }
};

template <class T>
std::vector<T> randv(int64_t n, double scale = 1.0) {
  return strux::test::randn<T>(rng(), n, scale);
}
template <class T>
std::vector<T> zeros(int64_t n) {
  return std::vector<T>(static_cast<size_t>(n));
}

template <class T>
double tol() {
  return std::is_same_v<T, float> || std::is_same_v<T, std::complex<float>> ? 5e-4 : 1e-9;
}

// The GPU result against the CPU one: max |cpu - gpu| / max(1, max |cpu|).
template <class T>
void same(const Buf<T>& b, const char* what) {
  EXPECT_LE(strux::test::rel_err(b.h, b.get()), tol<T>()) << what;
}

struct StreamGuard {
  cudaStream_t s = nullptr;
  StreamGuard() { cudaStreamCreate(&s); }
  ~StreamGuard() { cudaStreamDestroy(s); }
};

Device gpu0() { return Device::cuda(0); }

// ---- fftconv ------------------------------------------------------------------------------------

template <class T>
void fftconv_case(int64_t B, int64_t H, int64_t L, int64_t Lk, strux::ConvMode mode, const std::string& solver) {
  SCOPED_TRACE(testing::Message() << "B=" << B << " H=" << H << " L=" << L << " Lk=" << Lk << " solver=" << solver);
  const DType dt = strux::dtype_of<T>::value;
  const int64_t n = B * H * L;
  Buf<T> u(randv<T>(n)), k(randv<T>(H * Lk)), pre(randv<T>(n)), post(randv<T>(n)), skip(randv<T>(H)),
      y(zeros<T>(n)), dy(randv<T>(n)), du(zeros<T>(n)), dk(zeros<T>(H * Lk)), dpre(zeros<T>(n)),
      dpost(zeros<T>(n)), dskip(zeros<T>(H));
  op::FFTConv cpu({B, H, L, Lk, mode, dt});
  op::FFTConv gpu({B, H, L, Lk, mode, dt, gpu0()}, strux::Options{solver});
  EXPECT_NE(gpu.describe().find("cuda:0"), std::string::npos) << gpu.describe();
  StreamGuard s;
  cpu.forward({u.cpu({B, H, L}), k.cpu({H, Lk}), y.cpu({B, H, L}), pre.cpu({B, H, L}), post.cpu({B, H, L}), skip.cpu({H})});
  gpu.forward({u.gpu({B, H, L}), k.gpu({H, Lk}), y.gpu({B, H, L}), pre.gpu({B, H, L}), post.gpu({B, H, L}), skip.gpu({H})},
              {}, s.s);
  same(y, "y");
  cpu.backward({dy.cpu({B, H, L}), u.cpu({B, H, L}), k.cpu({H, Lk}), du.cpu({B, H, L}), dk.cpu({H, Lk}),
                pre.cpu({B, H, L}), post.cpu({B, H, L}), skip.cpu({H}), dpre.cpu({B, H, L}), dpost.cpu({B, H, L}),
                dskip.cpu({H})});
  gpu.backward({dy.gpu({B, H, L}), u.gpu({B, H, L}), k.gpu({H, Lk}), du.gpu({B, H, L}), dk.gpu({H, Lk}),
                pre.gpu({B, H, L}), post.gpu({B, H, L}), skip.gpu({H}), dpre.gpu({B, H, L}), dpost.gpu({B, H, L}),
                dskip.gpu({H})},
               {}, s.s);
  same(du, "du");
  same(dk, "dk");
  same(dpre, "dpregate");
  same(dpost, "dpostgate");
  same(dskip, "dskip");
}

TEST(ApiCuda, FFTConv) {
  REQUIRE_GPU();
  using strux::ConvMode;
  for (auto [B, H, L, Lk] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {2, 3, 17, 5}, {1, 2, 31, 40}}) {
    fftconv_case<float>(B, H, L, Lk, ConvMode::Causal, "");
    fftconv_case<double>(B, H, L, Lk, ConvMode::Causal, "cufft");
  }
  fftconv_case<float>(2, 3, 1024, 1024, ConvMode::Causal, "fused");
  fftconv_case<float>(2, 3, 1024, 100, ConvMode::Circular, "fused");
  fftconv_case<float>(2, 3, 1024, 100, ConvMode::Circular, "cufft");
  fftconv_case<double>(1, 2, 29, 7, ConvMode::Circular, "");
  // The blocks solver (overlap-save through an inner circular plan): several blocks per row
  // (N = 1024, S = 925 at 100 taps; N = 4096 at 1000), Lk > L, circular with block 0's head
  // wrapped from the row's end, and the inner plan's direct kernels at 5 taps.
  fftconv_case<float>(2, 3, 5001, 100, ConvMode::Causal, "blocks");
  fftconv_case<double>(1, 2, 20011, 1000, ConvMode::Causal, "blocks");
  fftconv_case<float>(1, 2, 31, 40, ConvMode::Causal, "blocks");
  fftconv_case<double>(2, 1, 3001, 257, ConvMode::Circular, "blocks");
  fftconv_case<float>(1, 2, 2500, 5, ConvMode::Circular, "blocks");
  EXPECT_NE(op::FFTConv({1, 1, 5001, 100, ConvMode::Causal, DType::f32, gpu0()}, strux::Options{"blocks"})
                .describe()
                .find("blocks: overlap-save over 6 blocks per row"),
            std::string::npos);
  // "fused" where it does not apply (float64) is an error naming the option.
  EXPECT_THROW(op::FFTConv({1, 1, 1024, 10, ConvMode::Causal, DType::f64, gpu0()}, strux::Options{"fused"}),
               strux::ValueError);
}

// ---- block Toeplitz -----------------------------------------------------------------------------

template <class T>
void toeplitz_case(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, strux::ToeplitzLayout layout, const std::string& solver) {
  SCOPED_TRACE(testing::Message() << "Nt=" << Nt << " Nd=" << Nd << " Nm=" << Nm << " R=" << R << " solver=" << solver);
  const DType dt = strux::dtype_of<T>::value;
  const bool tm = layout == strux::ToeplitzLayout::TimeMajor;
  Buf<T> blocks(randv<T>(Nt * Nd * Nm)), m(randv<T>(Nt * Nm * R)), d(zeros<T>(Nt * Nd * R)), dd(randv<T>(Nt * Nd * R)),
      dm(zeros<T>(Nt * Nm * R)), db(zeros<T>(Nt * Nd * Nm));
  auto vec = [&](Buf<T>& b, int64_t n, bool g) {
    const int64_t a0 = tm ? Nt : n, a1 = tm ? n : Nt;
    if (R == 1) return g ? b.gpu({a0, a1}) : b.cpu({a0, a1});
    return g ? b.gpu({a0, a1, R}) : b.cpu({a0, a1, R});
  };
  op::BlockToeplitz cpu({Nt, Nd, Nm, R, layout, dt});
  op::BlockToeplitz gpu({Nt, Nd, Nm, R, layout, dt, gpu0()}, strux::Options{solver});
  StreamGuard s;
  cpu.set_blocks(blocks.cpu({Nt, Nd, Nm}));
  gpu.set_blocks(blocks.gpu({Nt, Nd, Nm}), s.s);
  EXPECT_FALSE(gpu.describe().empty());
  cpu.forward({vec(m, Nm, false), vec(d, Nd, false)});
  gpu.forward({vec(m, Nm, true), vec(d, Nd, true)}, {}, s.s);
  same(d, "d");
  cpu.backward({vec(dd, Nd, false), vec(dm, Nm, false), vec(m, Nm, false), db.cpu({Nt, Nd, Nm})});
  gpu.backward({vec(dd, Nd, true), vec(dm, Nm, true), vec(m, Nm, true), db.gpu({Nt, Nd, Nm})}, {}, s.s);
  same(dm, "dm");
  same(db, "dblocks");
}

TEST(ApiCuda, BlockToeplitz) {
  REQUIRE_GPU();
  using strux::ToeplitzLayout;
  for (const char* solver : {"", "blas", "gemm", "kernels"}) {
    toeplitz_case<float>(7, 3, 5, 1, ToeplitzLayout::TimeMajor, solver);
    toeplitz_case<double>(13, 2, 3, 3, ToeplitzLayout::SpaceMajor, solver);
  }
  toeplitz_case<float>(1, 1, 1, 1, ToeplitzLayout::SpaceMajor, "");
  toeplitz_case<float>(9, 4, 3, 5, ToeplitzLayout::TimeMajor, "real-gemm");
  toeplitz_case<double>(64, 5, 7, 2, ToeplitzLayout::TimeMajor, "");
}

// ---- ks -----------------------------------------------------------------------------------------

template <class T>
View act(Buf<T>& b, int64_t n, int64_t batch, strux::KSLayout l, bool g) {
  if (l == strux::KSLayout::BatchFirst) return g ? b.gpu({batch, n}) : b.cpu({batch, n});
  return g ? b.gpu({n, batch}) : b.cpu({n, batch});
}

template <class T>
void ks_chain_case(const std::vector<strux::KSPattern>& pats, int64_t batch, strux::KSLayout layout,
                   const std::string& solver = "") {
  SCOPED_TRACE(testing::Message() << strux::dtype_name(strux::dtype_of<T>::value) << ", " << pats.size()
                                  << " factors, batch " << batch << " solver=" << solver);
  const DType dt = strux::dtype_of<T>::value;
  const int64_t N = pats.back().cols(), M = pats.front().rows();
  Buf<T> x(randv<T>(N * batch)), y(zeros<T>(M * batch)), dy(randv<T>(M * batch)),
      dx(zeros<T>(N * batch));
  std::vector<std::unique_ptr<Buf<T>>> w, dw;
  std::vector<View> wc, wg, dwc, dwg;
  for (const auto& p : pats) {
    w.push_back(std::make_unique<Buf<T>>(randv<T>(p.nnz())));
    dw.push_back(std::make_unique<Buf<T>>(zeros<T>(p.nnz())));
    wc.push_back(w.back()->cpu({p.a, p.b, p.c, p.d}));
    wg.push_back(w.back()->gpu({p.a, p.b, p.c, p.d}));
    dwc.push_back(dw.back()->cpu({p.a, p.b, p.c, p.d}));
    dwg.push_back(dw.back()->gpu({p.a, p.b, p.c, p.d}));
  }
  StreamGuard s;
  if (pats.size() == 1 && solver.empty()) {
    op::KSFactor cpu({pats[0], batch, layout, dt});
    op::KSFactor gpu({pats[0], batch, layout, dt, gpu0()});
    EXPECT_FALSE(gpu.describe().empty());
    cpu.forward({act(x, N, batch, layout, false), wc[0], act(y, M, batch, layout, false)});
    gpu.forward({act(x, N, batch, layout, true), wg[0], act(y, M, batch, layout, true)}, {}, s.s);
    same(y, "factor y");
    cpu.backward({act(dy, M, batch, layout, false), act(x, N, batch, layout, false), wc[0],
                  act(dx, N, batch, layout, false), dwc[0]});
    gpu.backward({act(dy, M, batch, layout, true), act(x, N, batch, layout, true), wg[0],
                  act(dx, N, batch, layout, true), dwg[0]},
                 {}, s.s);
    same(dx, "factor dx");
    same(*dw[0], "factor dw");
  }
  op::KSChain cpu({pats, batch, layout, dt});
  op::KSChain gpu({pats, batch, layout, dt, gpu0()}, strux::Options{solver});
  EXPECT_FALSE(gpu.describe().empty());
  if (solver == "fused") EXPECT_NE(gpu.describe().find("forward fused"), std::string::npos) << gpu.describe();
  // The caller's workspace, of exactly workspace_bytes().
  void* ws = nullptr;
  ok(cudaMalloc(&ws, std::max<size_t>(1, gpu.workspace_bytes())));
  cpu.forward({act(x, N, batch, layout, false), wc, act(y, M, batch, layout, false)});
  gpu.forward({act(x, N, batch, layout, true), wg, act(y, M, batch, layout, true)}, {ws, gpu.workspace_bytes()}, s.s);
  same(y, "chain y");
  cpu.backward({act(dy, M, batch, layout, false), act(x, N, batch, layout, false), wc, act(dx, N, batch, layout, false), dwc});
  gpu.backward({act(dy, M, batch, layout, true), act(x, N, batch, layout, true), wg, act(dx, N, batch, layout, true), dwg},
               {ws, gpu.workspace_bytes()}, s.s);
  same(dx, "chain dx");
  for (size_t i = 0; i < pats.size(); ++i) same(*dw[i], "chain dw");
  if (gpu.workspace_bytes() > 1)
    EXPECT_THROW(gpu.forward({act(x, N, batch, layout, true), wg, act(y, M, batch, layout, true)},
                             {ws, gpu.workspace_bytes() - 1}, s.s),
                 strux::ValueError);
  cudaDeviceSynchronize();
  cudaFree(ws);
}

TEST(ApiCuda, KSFactorAndChain) {
  REQUIRE_GPU();
  using P = strux::KSPattern;
  for (auto layout : {strux::KSLayout::BatchFirst, strux::KSLayout::BatchLast}) {
    ks_chain_case<float>({P{1, 1, 1, 1}}, 1, layout);
    ks_chain_case<double>({P{1, 1, 1, 1}}, 1, layout);
    ks_chain_case<float>({P{2, 3, 5, 1}}, 7, layout);
    ks_chain_case<double>({P{2, 3, 5, 2}}, 7, layout);
    ks_chain_case<float>({P{4, 16, 16, 4}}, 33, layout);
    ks_chain_case<double>({P{4, 16, 16, 4}}, 300, layout);
    ks_chain_case<float>({P{3, 2, 2, 1}, P{1, 3, 2, 2}, P{2, 2, 1, 1}}, 5, layout);
    ks_chain_case<double>({P{3, 2, 2, 1}, P{1, 3, 2, 2}, P{2, 2, 1, 1}}, 5, layout);
    ks_chain_case<float>({P{1, 32, 32, 32}, P{32, 32, 32, 1}}, 64, layout);
    ks_chain_case<double>({P{1, 32, 32, 32}, P{32, 32, 32, 1}}, 64, layout);
    // The fused pair (3xTF32: float32 accuracy), forced: its workspace holds the group-major
    // weight copies of the factors with d > 1; a partial last block of rows.
    for (const char* solver : {"fused", "factors"}) {
      ks_chain_case<float>({P{1, 32, 32, 32}, P{32, 32, 32, 1}}, 64, layout, solver);
      ks_chain_case<float>({P{4, 32, 32, 8}, P{8, 32, 32, 4}}, 37, layout, solver);
      ks_chain_case<float>({P{1, 128, 32, 12}, P{12, 32, 32, 1}}, 5, layout, solver);
    }
  }
  using strux::op::KSChain;
  EXPECT_THROW(KSChain({{P{1, 8, 8, 4}, P{4, 8, 8, 1}}, 8, strux::KSLayout::BatchFirst, DType::f32, gpu0()},
                       strux::Options{"fused"}),
               strux::ValueError);  // b, c not multiples of 16 / 8: says why
}

// Half types: the GPU factor against the CPU float32 factor on the same (rounded) values; dw
// goes through the float32 accumulator in the workspace and is rounded once.
template <class H>
void ks_half_case(const strux::KSPattern& q, int64_t batch, strux::KSLayout layout, DType dt) {
  SCOPED_TRACE(testing::Message() << strux::dtype_name(dt) << " batch " << batch);
  const int64_t N = q.cols(), M = q.rows();
  auto round = [](std::vector<float> v) {
    for (auto& e : v) e = float(H(e));
    return v;
  };
  Buf<float> x(round(randv<float>(N * batch))), w(round(randv<float>(q.nnz()))), dy(round(randv<float>(M * batch))),
      y(zeros<float>(M * batch)), dx(zeros<float>(N * batch)), dw(zeros<float>(q.nnz()));
  auto to_dev = [](const std::vector<float>& v) {
    std::vector<H> hv(v.begin(), v.end());
    void* p = nullptr;
    ok(cudaMalloc(&p, std::max<size_t>(1, hv.size()) * sizeof(H)));
    ok(cudaMemcpy(p, hv.data(), hv.size() * sizeof(H), cudaMemcpyHostToDevice));
    return p;
  };
  auto from_dev = [](void* p, size_t n) {
    std::vector<H> hv(n);
    cudaDeviceSynchronize();
    cudaMemcpy(hv.data(), p, n * sizeof(H), cudaMemcpyDeviceToHost);
    return std::vector<float>(hv.begin(), hv.end());
  };
  void *xg = to_dev(x.h), *wg = to_dev(w.h), *dyg = to_dev(dy.h), *yg = to_dev(y.h), *dxg = to_dev(dx.h),
       *dwg = to_dev(dw.h);
  const bool bf = layout == strux::KSLayout::BatchFirst;
  auto a2 = [&](void* p, int64_t n) {
    return bf ? View(p, dt, {batch, n}, gpu0()) : View(p, dt, {n, batch}, gpu0());
  };
  const View wv(wg, dt, {q.a, q.b, q.c, q.d}, gpu0()), dwv(dwg, dt, {q.a, q.b, q.c, q.d}, gpu0());
  op::KSFactor cpu({q, batch, layout});
  op::KSFactor gpu({q, batch, layout, dt, gpu0()});
  EXPECT_GT(gpu.workspace_bytes(), 0u);
  cpu.forward({act(x, N, batch, layout, false), w.cpu({q.a, q.b, q.c, q.d}), act(y, M, batch, layout, false)});
  cpu.backward({act(dy, M, batch, layout, false), act(x, N, batch, layout, false), w.cpu({q.a, q.b, q.c, q.d}),
                act(dx, N, batch, layout, false), dw.cpu({q.a, q.b, q.c, q.d})});
  gpu.forward({a2(xg, N), wv, a2(yg, M)});
  gpu.backward({a2(dyg, M), a2(xg, N), wv, a2(dxg, N), dwv});
  auto check = [](const std::vector<float>& ref, const std::vector<float>& got, const char* what) {
    double e = 0, m = 1;
    for (size_t i = 0; i < ref.size(); ++i) e = std::max(e, double(std::abs(ref[i] - got[i]))), m = std::max(m, double(std::abs(ref[i])));
    EXPECT_LE(e / m, 2e-2) << what;
  };
  check(y.h, from_dev(yg, y.h.size()), "y");
  check(dx.h, from_dev(dxg, dx.h.size()), "dx");
  check(dw.h, from_dev(dwg, dw.h.size()), "dw");
  for (void* p : {xg, wg, dyg, yg, dxg, dwg}) cudaFree(p);
}

TEST(ApiCuda, KSHalfTypes) {
  REQUIRE_GPU();
  using P = strux::KSPattern;
  for (auto layout : {strux::KSLayout::BatchFirst, strux::KSLayout::BatchLast}) {
    ks_half_case<__half>(P{2, 16, 16, 2}, 48, layout, DType::f16);
    ks_half_case<__nv_bfloat16>(P{4, 8, 16, 1}, 40, layout, DType::bf16);
  }
}

// ---- scans ----------------------------------------------------------------------------------------

// Forward and backward (with h0, dh_last, dh0) of a scan on both devices. a_n: entries of a per
// (b, t); ashape: a's shape; a_scale: the spread of a, small enough that the transitions' norms
// stay below 1 (long sequences neither blow up nor underflow).
template <class S, class A, class Op>
void scan_compare(Op& cpu, Op& gpu, int64_t B, int64_t T, int64_t n, int64_t a_n, std::initializer_list<int64_t> ashape,
                  bool pass_h, double a_scale) {
  Buf<A> a(randv<A>(B * T * a_n, a_scale)), da(zeros<A>(B * T * a_n));
  Buf<S> u(randv<S>(B * T * n)), h0(randv<S>(B * n)), h(zeros<S>(B * T * n)), dh(randv<S>(B * T * n)),
      dh_last(randv<S>(B * n)), du(zeros<S>(B * T * n)), dh0(zeros<S>(B * n));
  StreamGuard s;
  auto av = [&](Buf<A>& b, bool g) {
    View v = g ? b.gpu({1}) : b.cpu({1});
    View w(v.data, v.dtype, ashape, v.device);
    return w;
  };
  cpu.forward({av(a, false), u.cpu({B, T, n}), h.cpu({B, T, n}), h0.cpu({B, n})});
  gpu.forward({av(a, true), u.gpu({B, T, n}), h.gpu({B, T, n}), h0.gpu({B, n})}, {}, s.s);
  same(h, "h");
  cpu.backward({dh.cpu({B, T, n}), av(a, false), u.cpu({B, T, n}), av(da, false), du.cpu({B, T, n}), h0.cpu({B, n}),
                View(), dh_last.cpu({B, n}), dh0.cpu({B, n})});
  gpu.backward({dh.gpu({B, T, n}), av(a, true), u.gpu({B, T, n}), av(da, true), du.gpu({B, T, n}), h0.gpu({B, n}),
                pass_h ? h.gpu({B, T, n}) : View(), dh_last.gpu({B, n}), dh0.gpu({B, n})},
               {}, s.s);
  same(da, "da");
  same(du, "du");
  same(dh0, "dh0");
}

template <class S>
void diag_case(int64_t B, int64_t T, int64_t n) {
  SCOPED_TRACE(testing::Message() << strux::dtype_name(strux::dtype_of<S>::value) << " B=" << B << " T=" << T << " n=" << n);
  op::DiagScan cpu({B, T, n, strux::dtype_of<S>::value});
  op::DiagScan gpu({B, T, n, strux::dtype_of<S>::value, gpu0()});
  EXPECT_FALSE(gpu.describe().empty());
  scan_compare<S, S>(cpu, gpu, B, T, n, n, {B, T, n}, true, 0.5);
  scan_compare<S, S>(cpu, gpu, B, T, n, n, {B, T, n}, false, 0.5);
}

template <class R>
void circulant_case(int64_t B, int64_t T, int64_t n) {
  SCOPED_TRACE(testing::Message() << "circulant B=" << B << " T=" << T << " n=" << n);
  const DType dt = strux::dtype_of<R>::value;
  op::CirculantScan cpu({B, T, n, false, dt}), gpu({B, T, n, false, dt, gpu0()});
  scan_compare<R, R>(cpu, gpu, B, T, n, n, {B, T, n}, false, 0.5 / std::sqrt(double(n)));
  const int64_t nf = n / 2 + 1;
  op::CirculantScan cf({B, T, n, true, dt}), gf({B, T, n, true, dt, gpu0()});
  scan_compare<R, std::complex<R>>(cf, gf, B, T, n, nf, {B, T, nf}, false, 0.5);
}

TEST(ApiCuda, Scans) {
  REQUIRE_GPU();
  for (auto [B, T, n] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {2, 7, 5}, {3, 129, 64}, {1, 1000, 3}}) {
    diag_case<float>(B, T, n);
    diag_case<double>(B, T, n);
    diag_case<std::complex<float>>(B, T, n);
    diag_case<cd>(B, T, n);
    circulant_case<float>(B, T, n);
    circulant_case<double>(B, T, n);
  }
  for (auto [B, T, p, k] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {2, 5, 2, 3}, {1, 300, 3, 8}, {2, 40, 4, 100}}) {
    op::BlockCirculantScan cpu({B, T, p, k}), gpu({B, T, p, k, DType::f32, gpu0()});
    EXPECT_FALSE(gpu.describe().empty());
    const double sc = 0.5 / std::sqrt(double(p * k));
    scan_compare<float, float>(cpu, gpu, B, T, p * k, p * p * k, {B, T, p, p, k}, false, sc);
    op::BlockCirculantScan cpu64({B, T, p, k, DType::f64}), gpu64({B, T, p, k, DType::f64, gpu0()});
    scan_compare<double, double>(cpu64, gpu64, B, T, p * k, p * p * k, {B, T, p, p, k}, false, sc);
  }
  EXPECT_THROW(op::BlockCirculantScan({1, 2, 2, 2, DType::f16, gpu0()}), strux::TypeError);
}

TEST(ApiCuda, Errors) {
  REQUIRE_GPU();
  int count = 0;
  cudaGetDeviceCount(&count);
  EXPECT_THROW(op::DiagScan({1, 2, 3, DType::f32, Device::cuda(count)}), strux::ValueError);
  op::DiagScan sc({1, 2, 3, DType::f32, gpu0()});
  Buf<float> a(randv<float>(6)), h(zeros<float>(6));
  // A host array given to a CUDA operator.
  EXPECT_THROW(sc.forward({a.cpu({1, 2, 3}), a.gpu({1, 2, 3}), h.gpu({1, 2, 3})}), strux::ValueError);
  if (sc.workspace_bytes() > 0)
    EXPECT_THROW(sc.forward({a.gpu({1, 2, 3}), a.gpu({1, 2, 3}), h.gpu({1, 2, 3})}, {h.d, 1}), strux::ValueError);
  EXPECT_THROW(op::FFTConv({1, 1, 8, 2, strux::ConvMode::Causal, DType::f32, gpu0()}, strux::Options{"nope"}),
               strux::ValueError);
}

}  // namespace

#endif  // STRUX_HAVE_CUDA
