// DiagScanPlan: argument checks, workspace layout and dtype dispatch for the diagonal scan.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/buffer.hpp"
#include "cuda/check.hpp"
#include "cuda/scan/diag_scan_chunk.cuh"
#include "cuda/scan/diag_scan_kernel.cuh"
#include "cuda/scan/diag_scan_pipe.cuh"
#include "cuda/scan/diag_scan_rows.cuh"
#include "cuda/scan/diag_scan_seq.cuh"
#include "cuda/scan/diag_scan_tile.cuh"

#include <algorithm>
#include <initializer_list>
#include <mutex>
#include <string>
#include <type_traits>
#include <cstdint>
#include "strux/core.hpp"
#include "strux/cuda/scan.hpp"

namespace strux::cuda {

// The chunk kernel's workspace (header, flags, published values; see diag_scan_chunk.cuh) and
// the order of the calls that use it: a call on another stream than the last one waits for it.
// The tile kernel uses only its launch shape (vec, tile_lr, tile_ns): no workspace, no ordering.
struct DiagScanOwned {
  DeviceBuffer buf;
  bool vec = false;  // vector lanes possible (n a multiple of their width, chunk_lane_width / tile_vw)
  int64_t flag_cap = 0;  // flags: the most blocks of any launch of the plan
  int64_t pipe_grid[2][2] = {};  // pipe: persistent blocks per launch [vector lanes][backward]
  int tile_lr = 0;  // tile: 16-byte lanes per row of a tile (2, 4, 8, 16)
  int tile_ns[2][2] = {};  // tile: stages per launch [vector lanes][backward]
  std::mutex m;
  cudaEvent_t ev = nullptr;
  cudaStream_t last = nullptr;
  bool used = false;
  ~DiagScanOwned() {
    if (ev) cudaEventDestroy(ev);
  }
  template <class F>
  void run(cudaStream_t s, F&& launch) {
    std::lock_guard<std::mutex> lock(m);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    STRUX_CUDA(cudaStreamIsCapturing(s, &cs));
    const bool capturing = cs != cudaStreamCaptureStatusNone;
    if (!capturing && used && s != last) STRUX_CUDA(cudaStreamWaitEvent(s, ev, 0));
    launch();
    if (!capturing) {
      STRUX_CUDA(cudaEventRecord(ev, s));
      used = true, last = s;
    }
  }
};

namespace {
struct Layout {
  int64_t ctiles, n_tiles, n_chunks, nblk, vbytes;
  int64_t flags_off, aggA_off, aggH_off, incl_off, total, zero_bytes;
};

int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

Layout layout(int64_t B, int64_t T, int64_t n, DType dt) {
  using namespace scan;
  Layout L{};
  L.ctiles = (n + CW - 1) / CW;
  L.n_tiles = B * L.ctiles;
  L.n_chunks = (T + CH - 1) / CH;
  L.nblk = L.n_tiles * L.n_chunks;
  L.vbytes = dt == DType::c128 ? 16 : (dt == DType::c64 || dt == DType::f64) ? 8 : 4;
  L.flags_off = 256;  // the block counter lives at offset 0
  L.aggA_off = align256(L.flags_off + 4 * L.nblk);
  L.zero_bytes = L.aggA_off;  // counter and flags start at zero on every call
  const int64_t vb = align256(L.nblk * CW * L.vbytes);
  L.aggH_off = L.aggA_off + vb;
  L.incl_off = L.aggH_off + vb;
  L.total = L.incl_off + vb;
  return L;
}

// The chunk kernel's workspace: header, `cap` flags (one per block of the launch; the same
// offsets for every launch of the plan, so a flag word never held anything but flags), then per
// (block, lane) the published aggregate (product, local state) and inclusive state, VW values of
// the compute type each.
struct ChunkLayout {
  int64_t ctiles, nblk, aggA_off, aggH_off, incl_off, total;
};
constexpr int64_t kChunkFlagsOff = 256;

template <class S, int VW>
ChunkLayout chunk_layout(int64_t B, int64_t T, int64_t n, int64_t chk, int64_t cap) {
  using V = typename scan::Tr<S>::V;
  ChunkLayout L{};
  L.ctiles = (B * (n / VW) + 31) / 32;
  L.nblk = L.ctiles * ((T + chk - 1) / chk);
  L.aggA_off = align256(kChunkFlagsOff + 4 * std::max(cap, L.nblk));
  const int64_t vb = align256(L.nblk * 32 * VW * int64_t(sizeof(V)));
  L.aggH_off = L.aggA_off + vb;
  L.incl_off = L.aggH_off + vb;
  L.total = L.incl_off + vb;
  return L;
}
// Steps per chunk of the chunk and pipe kernels.
template <class S, int VW, bool REV>
constexpr int64_t chunk_steps(bool pipe) {
  return pipe ? scan::PP_WARPS * scan::pipe_lc<S, VW, REV>() : scan::CK_WARPS * scan::chunk_lc<S, VW, REV>();
}

void fill(scan::ChunkArgs& g, const ChunkLayout& L, void* ws) {
  char* w = static_cast<char*>(ws);
  g.ctiles = L.ctiles, g.nblk = L.nblk;
  g.hdr = reinterpret_cast<unsigned int*>(w);
  g.flags = reinterpret_cast<unsigned int*>(w + kChunkFlagsOff);
  g.aggA = w + L.aggA_off, g.aggH = w + L.aggH_off, g.incl = w + L.incl_off;
}
template <class S, bool REV, int VW>
void launch_chunk(scan::ChunkArgs g, void* ws, int64_t cap, cudaStream_t s) {
  fill(g, chunk_layout<S, VW>(g.B, g.T, g.n, chunk_steps<S, VW, REV>(false), cap), ws);
  scan::diag_scan_chunk<S, VW, REV><<<unsigned(g.nblk), scan::CK_THREADS, 0, s>>>(g);
  STRUX_LAUNCH("diag_scan_chunk");
}

// The pipe kernel: a persistent grid (pipe_grid: resident blocks, at most one per chunk).
template <class S, bool REV, int VW>
void launch_pipe(scan::ChunkArgs g, void* ws, int64_t cap, int64_t grid, cudaStream_t s) {
  fill(g, chunk_layout<S, VW>(g.B, g.T, g.n, chunk_steps<S, VW, REV>(true), cap), ws);
  constexpr int smem = scan::pipe_smem_bytes<S, VW, REV>();
  scan::diag_scan_pipe<S, VW, REV><<<unsigned(std::min(grid, g.nblk)), scan::PP_THREADS, smem, s>>>(g);
  STRUX_LAUNCH("diag_scan_pipe");
}

// Resident blocks of the pipe kernel on this device (sets its shared-memory size attribute).
template <class S, bool REV, int VW>
int64_t pipe_grid(int64_t sms) {
  constexpr int smem = scan::pipe_smem_bytes<S, VW, REV>();
  STRUX_CUDA(cudaFuncSetAttribute(scan::diag_scan_pipe<S, VW, REV>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  STRUX_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scan::diag_scan_pipe<S, VW, REV>,
                                                           scan::PP_THREADS, smem));
  return std::max<int64_t>(1, per_sm) * sms;
}

template <class S, bool REV>
void run_chunk(DiagScanOwned& own, bool pipe, bool vec, const scan::ChunkArgs& g, cudaStream_t s) {
  constexpr int VW = scan::chunk_vw<S>();
  own.run(s, [&] {
    if (pipe && vec)
      launch_pipe<S, REV, VW>(g, own.buf.get(), own.flag_cap, own.pipe_grid[1][REV], s);
    else if (pipe)
      launch_pipe<S, REV, 1>(g, own.buf.get(), own.flag_cap, own.pipe_grid[0][REV], s);
    else if (vec)
      launch_chunk<S, REV, VW>(g, own.buf.get(), own.flag_cap, s);
    else
      launch_chunk<S, REV, 1>(g, own.buf.get(), own.flag_cap, s);
  });
}

template <class S, bool REV>
void launch(const scan::ScanArgs<S, typename scan::Tr<S>::V>& args0, const Layout& L, void* ws,
            cudaStream_t s) {
  using V = typename scan::Tr<S>::V;
  auto args = args0;
  char* w = static_cast<char*>(ws);
  args.ctiles = L.ctiles;
  args.n_tiles = L.n_tiles;
  args.n_chunks = L.n_chunks;
  args.counter = reinterpret_cast<int*>(w);
  args.flags = reinterpret_cast<int*>(w + L.flags_off);
  args.aggA = reinterpret_cast<V*>(w + L.aggA_off);
  args.aggH = reinterpret_cast<V*>(w + L.aggH_off);
  args.incl = reinterpret_cast<V*>(w + L.incl_off);
  STRUX_CUDA(cudaMemsetAsync(ws, 0, size_t(L.zero_bytes), s));
  scan::diag_scan_kernel<S, REV><<<unsigned(L.nblk), scan::CW * scan::TW, 0, s>>>(args);
  STRUX_LAUNCH("diag_scan_kernel");
}

// The solver table of diag_scan (bench/NOTES-gpu-ks-scan.md#scan-solver-rule), at plan time:
// the streaming kernel runs one thread per channel through the whole sequence; past one wave of
// resident threads (SEQ_THREADS * SEQ_MIN_BLOCKS per SM) it packs 16 bytes of channels per thread where n allows
// (and, per call, every pointer). With few channels (up to CHUNK_MAX_PER_SM per SM) and time to
// split (T > one look-back chunk) the chunk kernel cuts time into chunks with a windowed
// look-back; it beat both the look-back kernel and seq1 there, and lost to the streaming kernels
// at many channels. A sequence within one chunk streams: splitting gains nothing and the plan
// would own a workspace. float64 / complex128 run the look-back kernel only.
constexpr int64_t CHUNK_MAX_PER_SM = 128;
// The tile kernel's width: the widest row of 256, 128, 64 or 32 bytes (16 to 2 lanes) that still
// gives ~one tile per SM (15 of 16 SMs busy). Measured (H200, float32): 256 bytes beat 128 by 3-8
// points where it leaves one tile per SM; 64 lost to 32 where it left half the SMs idle.
int tile_lanes_per_row(int64_t lanes, int64_t sms) {
  for (int lr : {16, 8, 4})
    if (lanes * 16 >= lr * sms * 15) return lr;
  return 2;
}
// Above 8 tiles of 256 bytes per SM (one resident wave, a share of shared memory for each block's
// stages) the streaming seqv kernel is as fast and needs no stages.
constexpr int64_t TILE_MAX_LANES_PER_SM = 128;

int sm_count() {
  int dev = 0, sms = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// float64 / complex128 run the look-back kernel only: the streaming kernels pack 32-bit words
// and their register rings are sized for 2- to 8-byte elements in float32 arithmetic.
bool has_seq(DType dt) { return dt != DType::f64 && dt != DType::c128; }
// The rows kernel's tile in time steps: RW_THREADS threads of 16 bytes each.
int64_t rows_tile(DType dt) {
  return int64_t(scan::RW_THREADS) * 16 / (dt == DType::c64 ? 8 : dt == DType::f32 ? 4 : 2);
}
int64_t vec_width(DType dt) {
  return dt == DType::c64 || dt == DType::f64 ? 2 : dt == DType::c128 ? 1 : dt == DType::f32 ? 4 : 8;
}

struct Problem {
  int64_t B, T, n, sms;
  DType dt;
};
struct Solver {
  DiagScanAlgo algo;
  bool (*applicable)(const Problem&);
  bool (*preferred)(const Problem&);
};
const Solver kSolvers[] = {
    // n == 1 (the time-last layout (B, n, T) as (B * n, T, 1)): one block per row, preferred from
    // one row per SM up and rows of at least one tile (H100, float32: 2.4x the chunk kernel's
    // forward at 132 rows, 4-5x from 528 rows, 79-95% of copy bandwidth; at 33 rows the chunk
    // kernel's time-parallel forward is 10% faster; rows shorter than a tile were not measured;
    // bench/NOTES-gpu-scan.md)
    {DiagScanAlgo::rows, [](const Problem& q) { return has_seq(q.dt) && q.n == 1; },
     [](const Problem& q) { return q.B >= q.sms && q.T >= rows_tile(q.dt); }},
    {DiagScanAlgo::lookback, [](const Problem&) { return true; }, [](const Problem& q) { return !has_seq(q.dt); }},
    // (B, T, n) with n a whole number of 16-byte lanes, time to stream (T > one chunk) and from about
    // one 32-byte tile per SM to one resident wave of 256-byte tiles: one block per channel tile for
    // the whole sequence, cp.async stages (H200, float32: 89-97% of copy forward, 61-95% backward,
    // against the chunk / seqv kernels' 54-70%; bench/NOTES-gpu-ks-scan.md, "diag_scan tile").
    {DiagScanAlgo::tile, [](const Problem& q) { return has_seq(q.dt); },
     [](const Problem& q) {
       const int64_t lanes = q.B * (q.n / vec_width(q.dt));
       return q.n % vec_width(q.dt) == 0 && q.T > scan::CH && tile_lanes_per_row(lanes, q.sms) * q.sms * 15 <= lanes * 16 &&
              lanes <= TILE_MAX_LANES_PER_SM * q.sms;
     }},
    {DiagScanAlgo::chunk, [](const Problem& q) { return has_seq(q.dt); },
     [](const Problem& q) { return q.B * q.n <= CHUNK_MAX_PER_SM * q.sms && q.T > scan::CH; }},
    {DiagScanAlgo::seqv, [](const Problem& q) { return has_seq(q.dt) && q.n % vec_width(q.dt) == 0; },
     [](const Problem& q) { return q.B * q.n > int64_t(scan::SEQ_THREADS) * scan::SEQ_MIN_BLOCKS * q.sms; }},
    {DiagScanAlgo::seq1, [](const Problem& q) { return has_seq(q.dt); },
     [](const Problem&) { return true; }},
    // forced only until measured (bench/NOTES-gpu-scan.md)
    {DiagScanAlgo::pipe, [](const Problem& q) { return has_seq(q.dt); }, [](const Problem&) { return false; }},
};

template <class S>
constexpr bool has_seq() { return !std::is_same<S, double>::value && !std::is_same<S, double2>::value; }

bool aligned(std::initializer_list<const void*> ptrs, uintptr_t bytes) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) return false;
  return true;
}
bool aligned16(std::initializer_list<const void*> ptrs) { return aligned(ptrs, 16); }

// The chunk kernel's lane width (scan::chunk_vw) in bytes and in elements.
int64_t chunk_lane_bytes(DType dt) { return dt == DType::f16 || dt == DType::bf16 ? 8 : 16; }
int64_t chunk_lane_width(DType dt) { return dt == DType::c64 ? 2 : 4; }

// seqv needs every pointer 16-byte aligned; else the call runs seq1.
DiagScanAlgo per_call(DiagScanAlgo algo, std::initializer_list<const void*> ptrs) {
  return algo == DiagScanAlgo::seqv && !aligned16(ptrs) ? DiagScanAlgo::seq1 : algo;
}

// D (ring depth): with one element per thread, 64 bytes of each stream in flight (16 steps at
// most); with 16-byte vectors 8 steps forward and 4 backward (3 streams), to stay in registers.
template <class S, bool REV, int VW>
void launch_seq(const scan::SeqArgs& args, cudaStream_t s) {
  constexpr int D = VW == 1 ? (64 / int(sizeof(S)) < 16 ? 64 / int(sizeof(S)) : 16) : (REV ? 4 : 8);
  const int64_t threads = args.B * (args.n / VW);
  const unsigned grid = unsigned((threads + scan::SEQ_THREADS - 1) / scan::SEQ_THREADS);
  if constexpr (REV)
    scan::diag_scan_seq_bwd<S, VW, D><<<grid, scan::SEQ_THREADS, 0, s>>>(args);
  else
    scan::diag_scan_seq_fwd<S, VW, D><<<grid, scan::SEQ_THREADS, 0, s>>>(args);
  STRUX_LAUNCH("diag_scan_seq");
}

template <class S, bool REV>
void run_seq(DiagScanAlgo algo, const scan::SeqArgs& args, cudaStream_t s) {
  if (algo == DiagScanAlgo::seqv)
    launch_seq<S, REV, 16 / int(sizeof(S))>(args, s);
  else
    launch_seq<S, REV, 1>(args, s);
}

// One block per row; 16-byte loads when every pointer is 16-byte aligned and a row is a whole
// number of 16-byte words (so every row starts aligned).
template <class S, bool REV>
void run_rows(const scan::SeqArgs& args, bool aligned_ptrs, cudaStream_t s) {
  const bool vec = aligned_ptrs && (args.T * int64_t(sizeof(S))) % 16 == 0;
  const unsigned grid = unsigned(args.B);
  if constexpr (REV) {
    if (vec) scan::diag_scan_rows_bwd<S, true><<<grid, scan::RW_THREADS, 0, s>>>(args);
    else scan::diag_scan_rows_bwd<S, false><<<grid, scan::RW_THREADS, 0, s>>>(args);
  } else {
    if (vec) scan::diag_scan_rows_fwd<S, true><<<grid, scan::RW_THREADS, 0, s>>>(args);
    else scan::diag_scan_rows_fwd<S, false><<<grid, scan::RW_THREADS, 0, s>>>(args);
  }
  STRUX_LAUNCH("diag_scan_rows");
}

// The tile kernel: one block per tile of LR lanes (VW channels each), ns stages of shared memory.
template <class S, bool REV, int VW, int LR>
void launch_tile(const scan::SeqArgs& g, int ns, cudaStream_t s) {
  const int64_t tiles = (g.B * (g.n / VW) + LR - 1) / LR;
  scan::diag_scan_tile<S, VW, LR, REV><<<unsigned(tiles), scan::TL_THREADS, ns * scan::tile_stage_bytes<S, VW>(REV), s>>>(g, ns);
  STRUX_LAUNCH("diag_scan_tile");
}

template <class S, bool REV>
void run_tile(const DiagScanOwned& own, bool vec, const scan::SeqArgs& g, cudaStream_t s) {
  constexpr int VW = scan::tile_vw<S>();
  if (!vec) return launch_tile<S, REV, 1, 32>(g, own.tile_ns[0][REV], s);
  if (own.tile_lr == 16) return launch_tile<S, REV, VW, 16>(g, own.tile_ns[1][REV], s);
  if (own.tile_lr == 8) return launch_tile<S, REV, VW, 8>(g, own.tile_ns[1][REV], s);
  if (own.tile_lr == 4) return launch_tile<S, REV, VW, 4>(g, own.tile_ns[1][REV], s);
  launch_tile<S, REV, VW, 2>(g, own.tile_ns[1][REV], s);
}

// Stages of a tile launch: the blocks of one wave (tiles / SMs per SM) share the SM's shared memory,
// as many stages each as their share holds (the stages in flight are the kernel's memory
// parallelism: ~32 KB per SM keeps copy bandwidth at ~1 us of latency), 2 to TL_MAX_STAGES; fewer
// while the occupancy API says the wave does not fit. Sets the kernel's shared-memory attributes.
template <class S, bool REV, int VW, int LR>
int tile_stages(int64_t B, int64_t n, int64_t sms) {
  auto* fn = scan::diag_scan_tile<S, VW, LR, REV>;
  constexpr int stage = scan::tile_stage_bytes<S, VW>(REV);
  int dev = 0, per_sm = 0, optin = 0, reserved = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev));
  cudaFuncAttributes fa{};
  STRUX_CUDA(cudaFuncGetAttributes(&fa, fn));
  const int64_t tiles = (B * (n / VW) + LR - 1) / LR;
  const int64_t wave = std::max<int64_t>(1, (tiles + sms - 1) / sms);  // blocks per SM wanted
  const int64_t share = std::min<int64_t>(optin, per_sm / wave - reserved) - int64_t(fa.sharedSizeBytes);
  int ns = int(std::max<int64_t>(2, std::min<int64_t>(scan::TL_MAX_STAGES, share / stage)));
  const int most = std::min<int>(scan::TL_MAX_STAGES * stage, optin - int(fa.sharedSizeBytes));
  STRUX_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
  STRUX_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, int(cudaSharedmemCarveoutMaxShared)));
  for (; ns > 2; --ns) {
    int fit = 0;
    STRUX_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, fn, scan::TL_THREADS, size_t(ns) * stage));
    if (fit >= wave) break;
  }
  return ns;
}

// The tile plan: lanes per row (tile_bytes / 16, or tile_lanes_per_row), then the stages of every
// launch the plan may make.
template <class S>
void plan_tile(DiagScanOwned& own, int64_t B, int64_t n, int tile_bytes) {
  constexpr int VW = scan::tile_vw<S>();
  const int64_t sms = sm_count(), lanes = B * (n / VW);
  own.tile_lr = tile_bytes ? tile_bytes / 16 : tile_lanes_per_row(lanes, sms);
  own.tile_ns[0][0] = tile_stages<S, false, 1, 32>(B, n, sms);
  own.tile_ns[0][1] = tile_stages<S, true, 1, 32>(B, n, sms);
  if (!own.vec) return;
  auto both = [&](auto lr) {
    constexpr int LR = decltype(lr)::value;
    own.tile_ns[1][0] = tile_stages<S, false, VW, LR>(B, n, sms);
    own.tile_ns[1][1] = tile_stages<S, true, VW, LR>(B, n, sms);
  };
  if (own.tile_lr == 16) both(std::integral_constant<int, 16>{});
  else if (own.tile_lr == 8) both(std::integral_constant<int, 8>{});
  else if (own.tile_lr == 4) both(std::integral_constant<int, 4>{});
  else both(std::integral_constant<int, 2>{});
}

template <class F>
void by_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    case DType::c64: return f(float2{});
    case DType::f64: return f(double{});
    case DType::c128: return f(double2{});
    default: break;
  }
  throw TypeError("diag_scan: unsupported dtype");
}
}  // namespace

const char* diag_scan_algo_name(DiagScanAlgo a) {
  switch (a) {
    case DiagScanAlgo::seq1: return "seq1";
    case DiagScanAlgo::seqv: return "seqv";
    case DiagScanAlgo::chunk: return "chunk";
    case DiagScanAlgo::pipe: return "pipe";
    case DiagScanAlgo::rows: return "rows";
    case DiagScanAlgo::tile: return "tile";
    default: return "lookback";
  }
}

DiagScanPlan::DiagScanPlan(int64_t B, int64_t T, int64_t n, DType dtype, const DiagScanOptions& opt)
    : B_(B), T_(T), n_(n), dtype_(dtype) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(n, "n");
  check_arg(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::c64 ||
                dtype == DType::f64 || dtype == DType::c128,
            "dtype", "expected float32, float16, bfloat16, float64, complex64 or complex128, got ",
            dtype_name(dtype));
  check_arg(layout(B, T, n, dtype).nblk < (int64_t(1) << 31), "a", "too many blocks for shape (",
            B, ", ", T, ", ", n, ")");
  check_arg(opt.tile_bytes == 0 || opt.tile_bytes == 32 || opt.tile_bytes == 64 || opt.tile_bytes == 128 ||
                opt.tile_bytes == 256,
            "tile_bytes", "expected 0 (automatic), 32, 64, 128 or 256, got ", opt.tile_bytes);
  check_arg(opt.tile_bytes == 0 || (opt.algo && *opt.algo == DiagScanAlgo::tile), "tile_bytes",
            "applies to the tile kernel only (algo tile)");
  const Problem q{B, T, n, has_seq(dtype) && !opt.algo ? int64_t(sm_count()) : 0, dtype};
  bool found = false;
  for (const Solver& s : kSolvers)
    if (opt.algo ? s.algo == *opt.algo && s.applicable(q) : s.applicable(q) && s.preferred(q)) {
      algo_ = s.algo, found = true;
      break;
    }
  if (!found)
    check_arg(false, "algo", "the forced kernel '", diag_scan_algo_name(*opt.algo),
            "' does not apply to dtype ", dtype_name(dtype), " with n = ", n,
            " (streaming, chunk, pipe, rows and tile kernels: not float64 / complex128; seqv: n a multiple of ",
            vec_width(dtype), "; rows: n = 1)");
  const bool pipe = algo_ == DiagScanAlgo::pipe;
  if (algo_ == DiagScanAlgo::chunk || pipe) {
    own_ = std::make_shared<DiagScanOwned>();
    own_->vec = n % chunk_lane_width(dtype) == 0;
    int64_t bytes = 0;
    by_type(dtype, [&](auto z) {
      using S = decltype(z);
      if constexpr (has_seq<S>()) {
        constexpr int VW = scan::chunk_vw<S>();
        // Every launch the plan may make (one-element or vector lanes, forward or backward)
        // shares the workspace: flags for the most chunks, values for the most bytes.
        const ChunkLayout ls[4] = {
            chunk_layout<S, 1>(B, T, n, chunk_steps<S, 1, false>(pipe), 0),
            chunk_layout<S, 1>(B, T, n, chunk_steps<S, 1, true>(pipe), 0),
            chunk_layout<S, VW>(B, T, n, chunk_steps<S, VW, false>(pipe), 0),
            chunk_layout<S, VW>(B, T, n, chunk_steps<S, VW, true>(pipe), 0)};
        const int nl = own_->vec ? 4 : 2;
        for (int i = 0; i < nl; ++i) own_->flag_cap = std::max(own_->flag_cap, ls[i].nblk);
        check_arg(own_->flag_cap < (int64_t(1) << 31), "a", "too many blocks for shape (", B, ", ", T, ", ", n, ")");
        bytes = chunk_layout<S, 1>(B, T, n, chunk_steps<S, 1, false>(pipe), own_->flag_cap).total;
        bytes = std::max(bytes, chunk_layout<S, 1>(B, T, n, chunk_steps<S, 1, true>(pipe), own_->flag_cap).total);
        if (own_->vec) {
          bytes = std::max(bytes, chunk_layout<S, VW>(B, T, n, chunk_steps<S, VW, false>(pipe), own_->flag_cap).total);
          bytes = std::max(bytes, chunk_layout<S, VW>(B, T, n, chunk_steps<S, VW, true>(pipe), own_->flag_cap).total);
        }
        if (pipe) {
          const int64_t sms = sm_count();
          own_->pipe_grid[0][0] = pipe_grid<S, false, 1>(sms);
          own_->pipe_grid[0][1] = pipe_grid<S, true, 1>(sms);
          own_->pipe_grid[1][0] = pipe_grid<S, false, VW>(sms);
          own_->pipe_grid[1][1] = pipe_grid<S, true, VW>(sms);
        }
      }
    });
    own_->buf.allocate(size_t(bytes));
    // Flags and counters start at 0 (epoch 0, nothing published); later calls leave them valid.
    STRUX_CUDA(cudaMemset(own_->buf.get(), 0, size_t(bytes)));
    STRUX_CUDA(cudaDeviceSynchronize());
    STRUX_CUDA(cudaEventCreateWithFlags(&own_->ev, cudaEventDisableTiming));
  }
  if (algo_ == DiagScanAlgo::tile) {
    own_ = std::make_shared<DiagScanOwned>();
    own_->vec = n % vec_width(dtype) == 0;
    by_type(dtype, [&](auto z) {
      using S = decltype(z);
      if constexpr (has_seq<S>()) plan_tile<S>(*own_, B, n, opt.tile_bytes);
    });
  }
}

std::string DiagScanPlan::describe() const {
  std::string s = "diag_scan (" + std::to_string(B_) + ", " + std::to_string(T_) + ", " +
                  std::to_string(n_) + ") " + dtype_name(dtype_) + ": " + diag_scan_algo_name(algo_);
  if (algo_ == DiagScanAlgo::seqv) s += " (seq1 on calls with pointers not 16-byte aligned)";
  if (algo_ == DiagScanAlgo::rows) s += " (one block per row; 16-byte loads when pointers are 16-byte aligned and T a whole number of 16 bytes)";
  if (algo_ == DiagScanAlgo::tile) {
    const auto ns = [&](int v) {
      return std::to_string(own_->tile_ns[v][0]) + " / " + std::to_string(own_->tile_ns[v][1]) + " stages";
    };
    s += own_->vec ? " (" + std::to_string(16 * own_->tile_lr) + "-byte rows of 16-byte lanes per block, " + ns(1) +
                         " forward / backward; 32 one-element lanes, " + ns(0) + ", on calls with pointers not 16-byte aligned)"
                   : " (32 one-element lanes per block, " + ns(0) + " forward / backward)";
  }
  if (algo_ == DiagScanAlgo::chunk || algo_ == DiagScanAlgo::pipe)
    s += own_->vec ? " (" + std::to_string(chunk_lane_bytes(dtype_)) + "-byte lanes; one element per lane on calls "
                         "with pointers not " + std::to_string(chunk_lane_bytes(dtype_)) + "-byte aligned)"
                   : std::string(" (one element per lane)");
  return s;
}

int64_t DiagScanPlan::workspace_bytes() const {
  return algo_ == DiagScanAlgo::lookback ? layout(B_, T_, n_, dtype_).total : 0;
}

void DiagScanPlan::forward(const void* a, const void* b, const void* h0, void* h, void* ws,
                           void* stream, double scale) const {
  const Layout L = layout(B_, T_, n_, dtype_);
  by_type(dtype_, [&](auto z) {
    using S = decltype(z);
    scan::ScanArgs<S, typename scan::Tr<S>::V> args{};
    args.a = static_cast<const S*>(a);
    args.b = static_cast<const S*>(b);
    args.h0 = static_cast<const S*>(h0);
    args.h = static_cast<S*>(h);
    args.B = B_, args.T = T_, args.n = n_;
    args.scale = scale;
    const DiagScanAlgo algo = per_call(algo_, {a, b, h0, h});
    if constexpr (has_seq<S>())
      if (algo == DiagScanAlgo::chunk || algo == DiagScanAlgo::pipe)
        return run_chunk<S, false>(*own_, algo == DiagScanAlgo::pipe, own_->vec && aligned({a, b, h0, h}, chunk_lane_bytes(dtype_)),
                                   scan::ChunkArgs{a, b, h0, nullptr, h, nullptr, nullptr, nullptr, B_, T_, n_, 0, 0,
                                                   scale, nullptr, nullptr, nullptr, nullptr, nullptr},
                                   static_cast<cudaStream_t>(stream));
    if constexpr (has_seq<S>())
      if (algo == DiagScanAlgo::tile)
        return run_tile<S, false>(*own_, own_->vec && aligned16({a, b, h0, h}),
                                  scan::SeqArgs{a, b, h0, nullptr, h, nullptr, nullptr, nullptr, B_, T_, n_, scale},
                                  static_cast<cudaStream_t>(stream));
    if constexpr (has_seq<S>())
      if (algo == DiagScanAlgo::rows)
        return run_rows<S, false>(scan::SeqArgs{a, b, h0, nullptr, h, nullptr, nullptr, nullptr, B_, T_, n_, scale},
                                  aligned16({a, b, h0, h}), static_cast<cudaStream_t>(stream));
    if constexpr (has_seq<S>())
      if (algo != DiagScanAlgo::lookback)
        return run_seq<S, false>(algo, scan::SeqArgs{a, b, h0, nullptr, h, nullptr, nullptr, nullptr, B_, T_, n_, scale},
                               static_cast<cudaStream_t>(stream));
    launch<S, false>(args, L, ws, static_cast<cudaStream_t>(stream));
  });
}

void DiagScanPlan::backward(const void* a, const void* h, const void* h0, const void* dh, void* da,
                            void* db, void* dh0, void* ws, void* stream) const {
  const Layout L = layout(B_, T_, n_, dtype_);
  by_type(dtype_, [&](auto z) {
    using S = decltype(z);
    scan::ScanArgs<S, typename scan::Tr<S>::V> args{};
    args.a = static_cast<const S*>(a);
    args.b = static_cast<const S*>(dh);
    args.h0 = static_cast<const S*>(h0);
    args.hf = static_cast<const S*>(h);
    args.da = static_cast<S*>(da);
    args.db = static_cast<S*>(db);
    args.dh0 = static_cast<S*>(dh0);
    args.B = B_, args.T = T_, args.n = n_;
    args.scale = 1.0;
    const DiagScanAlgo algo = per_call(algo_, {a, h, h0, dh, da, db, dh0});
    if constexpr (has_seq<S>())
      if (algo == DiagScanAlgo::chunk || algo == DiagScanAlgo::pipe)
        return run_chunk<S, true>(*own_, algo == DiagScanAlgo::pipe, own_->vec && aligned({a, h, h0, dh, da, db, dh0}, chunk_lane_bytes(dtype_)),
                                  scan::ChunkArgs{a, dh, h0, h, nullptr, da, db, dh0, B_, T_, n_, 0, 0, 1.0, nullptr,
                                                  nullptr, nullptr, nullptr, nullptr},
                                  static_cast<cudaStream_t>(stream));
    if constexpr (has_seq<S>())
      if (algo == DiagScanAlgo::tile)
        return run_tile<S, true>(*own_, own_->vec && aligned16({a, h, h0, dh, da, db, dh0}),
                                 scan::SeqArgs{a, dh, h0, h, nullptr, da, db, dh0, B_, T_, n_, 1.0},
                                 static_cast<cudaStream_t>(stream));
    if constexpr (has_seq<S>())
      if (algo == DiagScanAlgo::rows)
        return run_rows<S, true>(scan::SeqArgs{a, dh, h0, h, nullptr, da, db, dh0, B_, T_, n_, 1.0},
                                 aligned16({a, h, dh, da, db}), static_cast<cudaStream_t>(stream));
    if constexpr (has_seq<S>())
      if (algo != DiagScanAlgo::lookback)
        return run_seq<S, true>(algo, scan::SeqArgs{a, dh, h0, h, nullptr, da, db, dh0, B_, T_, n_, 1.0},
                              static_cast<cudaStream_t>(stream));
    launch<S, true>(args, L, ws, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace strux::cuda
