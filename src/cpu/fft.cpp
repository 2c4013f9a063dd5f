#include "cpu/fft.hpp"

#include <fftw3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "core/checked_size.hpp"
#include "strux/core.hpp"

namespace strux::cpu {

int64_t good_fft_size(int64_t n) {
  check_positive(n, "fft size");
  constexpr int64_t kMax = int64_t(1) << 62;
  check_arg(n <= kMax, "fft size", "expected at most 2^62, got ", n);
  // Every 7-smooth m is q 2^a with q = 3^i 5^j 7^k. Only q < 2n can win (the power of two
  // in [n, 2n) is a candidate), and for each such q the best a is the smallest with q 2^a >= n:
  // about log3(n) log5(n) log7(n) / 6 candidates. Products are checked against overflow.
  const auto below_2n = [n](int64_t q) { return q < n || q - n < n; };
  constexpr int64_t kTop = INT64_MAX / 7;
  int64_t best = 1;
  while (best < n) best *= 2;
  for (int64_t q7 = 1; below_2n(q7); q7 *= 7) {
    for (int64_t q5 = q7; below_2n(q5); q5 *= 5) {
      for (int64_t q = q5; below_2n(q); q *= 3) {
        int64_t m = q;
        while (m < n) m *= 2;
        best = std::min(best, m);
        if (q > kTop) break;
      }
      if (q5 > kTop) break;
    }
    if (q7 > kTop) break;
  }
  return best;
}

FFTPlanning parse_fft_planning(const std::string& s) {
  if (s == "estimate") return FFTPlanning::Estimate;
  if (s == "measure") return FFTPlanning::Measure;
  if (s == "patient") return FFTPlanning::Patient;
  throw ValueError(msg("argument 'planning': expected one of 'estimate', 'measure', 'patient', got '", s, "'"));
}

const char* fft_planning_name(FFTPlanning p) {
  return p == FFTPlanning::Estimate ? "estimate" : p == FFTPlanning::Measure ? "measure" : "patient";
}

namespace {
// FFTW's planner (and plan destruction, wisdom import/export) is not thread-safe: one lock
// for every such call of both precisions. Executing plans needs no lock.
std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

std::atomic<FFTPlanning> g_planning{FFTPlanning::Estimate};
std::string g_wisdom_dir;  // guarded by planner_mutex()

unsigned plan_flags(FFTPlanning p) {
  return p == FFTPlanning::Estimate ? FFTW_ESTIMATE : p == FFTPlanning::Measure ? FFTW_MEASURE : FFTW_PATIENT;
}

template <class T> struct Fftw;
template <> struct Fftw<float> {
  using C = fftwf_complex;
  static constexpr const char* kWisdomFile = "fftw3f.wisdom";
  static void* malloc(size_t b) { return fftwf_malloc(b); }
  static void free(void* p) { fftwf_free(p); }
  static void* r2c(int n, float* i, C* o, unsigned f) { return fftwf_plan_dft_r2c_1d(n, i, o, f); }
  static void* c2r(int n, C* i, float* o, unsigned f) { return fftwf_plan_dft_c2r_1d(n, i, o, f); }
  static void exec_r2c(void* p, float* i, C* o) { fftwf_execute_dft_r2c((fftwf_plan)p, i, o); }
  static void exec_c2r(void* p, C* i, float* o) { fftwf_execute_dft_c2r((fftwf_plan)p, i, o); }
  static void destroy(void* p) { fftwf_destroy_plan((fftwf_plan)p); }
  static int import_wisdom(const char* f) { return fftwf_import_wisdom_from_filename(f); }
  static int export_wisdom(const char* f) { return fftwf_export_wisdom_to_filename(f); }
};
template <> struct Fftw<double> {
  using C = fftw_complex;
  static constexpr const char* kWisdomFile = "fftw3.wisdom";
  static void* malloc(size_t b) { return fftw_malloc(b); }
  static void free(void* p) { fftw_free(p); }
  static void* r2c(int n, double* i, C* o, unsigned f) { return fftw_plan_dft_r2c_1d(n, i, o, f); }
  static void* c2r(int n, C* i, double* o, unsigned f) { return fftw_plan_dft_c2r_1d(n, i, o, f); }
  static void exec_r2c(void* p, double* i, C* o) { fftw_execute_dft_r2c((fftw_plan)p, i, o); }
  static void exec_c2r(void* p, C* i, double* o) { fftw_execute_dft_c2r((fftw_plan)p, i, o); }
  static void destroy(void* p) { fftw_destroy_plan((fftw_plan)p); }
  static int import_wisdom(const char* f) { return fftw_import_wisdom_from_filename(f); }
  static int export_wisdom(const char* f) { return fftw_export_wisdom_to_filename(f); }
};

namespace fs = std::filesystem;

// Writes one precision's wisdom to dir/<file> through a temporary file and a rename, so a
// reader (another process) never sees half a file; the last writer wins whole. Caller holds
// planner_mutex().
template <class T>
bool export_to(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path final_path = fs::path(dir) / Fftw<T>::kWisdomFile;
  // One temporary name per process: two processes saving at once must not share one.
  const fs::path tmp = fs::path(dir) / msg(Fftw<T>::kWisdomFile, ".tmp.", ::getpid());
  if (!Fftw<T>::export_wisdom(tmp.c_str())) return false;
  fs::rename(tmp, final_path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}
}  // namespace

void set_fft_planning(FFTPlanning p) { g_planning.store(p); }
FFTPlanning fft_planning() { return g_planning.load(); }

int set_wisdom_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(planner_mutex());
  g_wisdom_dir = dir;
  if (dir.empty()) return 0;
  int loaded = 0;
  std::error_code ec;
  for (const char* f : {Fftw<double>::kWisdomFile, Fftw<float>::kWisdomFile}) {
    const fs::path p = fs::path(dir) / f;
    if (!fs::is_regular_file(p, ec)) continue;
    const bool dbl = f == Fftw<double>::kWisdomFile;
    loaded += dbl ? Fftw<double>::import_wisdom(p.c_str()) : Fftw<float>::import_wisdom(p.c_str());
  }
  return loaded;
}

std::string wisdom_dir() {
  std::lock_guard<std::mutex> lock(planner_mutex());
  return g_wisdom_dir;
}

void save_wisdom(const std::string& dir) {
  check_arg(!dir.empty(), "dir", "expected a folder, got an empty path");
  std::lock_guard<std::mutex> lock(planner_mutex());
  if (!export_to<double>(dir) || !export_to<float>(dir))
    throw BackendError(msg("argument 'dir': could not write FFTW wisdom into '", dir, "'"));
}

template <class T>
AlignedBuffer<T>::AlignedBuffer(int64_t count) : n_(count) {
  if (count > 0) {
    // Callers check their size products (core/checked_size.hpp); this bound keeps the byte count
    // itself from wrapping. Out of memory is MemoryError; bindings add the argument's name.
    if (count <= kMaxBytes / int64_t(sizeof(T)))
      p_ = static_cast<T*>(Fftw<float>::malloc(sizeof(T) * size_t(count)));
    if (!p_)
      throw MemoryError(msg("out of memory allocating ", count, " x ", sizeof(T), " = ",
                            count <= kMaxBytes ? msg(count * int64_t(sizeof(T))) : std::string("more than 2^50"),
                            " bytes"));
  }
}
template <class T>
AlignedBuffer<T>& AlignedBuffer<T>::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) Fftw<float>::free(p_);
    p_ = o.p_; n_ = o.n_; o.p_ = nullptr; o.n_ = 0;
  }
  return *this;
}
template <class T>
AlignedBuffer<T>::~AlignedBuffer() {
  if (p_) Fftw<float>::free(p_);
}

template <class T>
RealFFT<T>::RealFFT(int64_t n, FFTPlanning effort) : n_(n), effort_(effort) {
  check_positive(n, "fft size");
  check_arg(n <= INT32_MAX, "fft size", "expected at most 2^31-1 points, got ", n);
  // Estimate plans never touch the arrays; the others time transforms on them.
  AlignedBuffer<T> re(n);
  AlignedBuffer<cplx<T>> ce(n / 2 + 1);
  using C = typename Fftw<T>::C;
  auto* cp = reinterpret_cast<C*>(ce.data());
  std::lock_guard<std::mutex> lock(planner_mutex());
  const unsigned f = plan_flags(effort);
  fwd_ = Fftw<T>::r2c(int(n), re.data(), cp, f);
  inv_ = Fftw<T>::c2r(int(n), cp, re.data(), f);
  if (!fwd_ || !inv_) {
    if (fwd_) Fftw<T>::destroy(fwd_);
    if (inv_) Fftw<T>::destroy(inv_);
    throw BackendError(msg("FFTW could not plan a real transform of size ", n));
  }
  // New measured wisdom is worth keeping; a failed write only loses a cache entry.
  if (effort != FFTPlanning::Estimate && !g_wisdom_dir.empty()) export_to<T>(g_wisdom_dir);
}

template <class T>
RealFFT<T>::~RealFFT() {
  std::lock_guard<std::mutex> lock(planner_mutex());
  if (fwd_) Fftw<T>::destroy(fwd_);
  if (inv_) Fftw<T>::destroy(inv_);
}

namespace {
// The bounded cache of one precision. Its lock is held for lookups and inserts only, never
// while FFTW plans: a lookup of a cached size never waits behind a long Measure of another.
template <class T>
struct PlanCache {
  struct Entry {
    std::shared_ptr<const RealFFT<T>> plan;
    uint64_t used;
  };
  std::mutex m;
  std::map<int64_t, Entry> map;
  uint64_t clock = 0;

  std::shared_ptr<const RealFFT<T>> find(int64_t n, FFTPlanning want) {
    std::lock_guard<std::mutex> lock(m);
    auto it = map.find(n);
    if (it == map.end() || it->second.plan->effort() < want) return nullptr;
    it->second.used = ++clock;
    return it->second.plan;
  }

  // Inserts p unless an equal or better plan arrived meanwhile; returns the one to use.
  std::shared_ptr<const RealFFT<T>> insert(std::shared_ptr<const RealFFT<T>> p) {
    std::vector<std::shared_ptr<const RealFFT<T>>> dropped;  // destroyed after unlocking
    std::shared_ptr<const RealFFT<T>> out;
    {
      std::lock_guard<std::mutex> lock(m);
      auto it = map.find(p->n());
      if (it != map.end() && it->second.plan->effort() >= p->effort()) {
        it->second.used = ++clock;
        out = it->second.plan;
      } else {
        if (it != map.end()) dropped.push_back(std::move(it->second.plan));
        map[p->n()] = Entry{p, ++clock};
        out = p;
        while (map.size() > kFFTCacheSize) {
          auto old = map.begin();
          for (auto j = map.begin(); j != map.end(); ++j)
            if (j->second.used < old->second.used) old = j;
          dropped.push_back(std::move(old->second.plan));
          map.erase(old);
        }
      }
    }
    dropped.clear();
    return out;
  }
};
}  // namespace

template <class T>
std::shared_ptr<const RealFFT<T>> RealFFT<T>::get(int64_t n) {
  static PlanCache<T>* cache = new PlanCache<T>();  // never destroyed: no FFTW calls at exit
  const FFTPlanning want = fft_planning();
  if (auto p = cache->find(n, want)) return p;
  return cache->insert(std::make_shared<const RealFFT<T>>(n, want));
}

template <class T>
void RealFFT<T>::forward(T* in, cplx<T>* out) const {
  Fftw<T>::exec_r2c(fwd_, in, reinterpret_cast<typename Fftw<T>::C*>(out));
}
template <class T>
void RealFFT<T>::inverse(cplx<T>* in, T* out) const {
  Fftw<T>::exec_c2r(inv_, reinterpret_cast<typename Fftw<T>::C*>(in), out);
}

template class AlignedBuffer<float>;
template class AlignedBuffer<double>;
template class AlignedBuffer<cplx<float>>;
template class AlignedBuffer<cplx<double>>;
template class RealFFT<float>;
template class RealFFT<double>;

}  // namespace strux::cpu
