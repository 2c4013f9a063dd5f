// The core types of the operator API and the checks every operator runs on its arguments.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "api/common.hpp"

namespace strux {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::c64: return "complex64";
    case DType::c128: return "complex128";
  }
  return "unknown dtype";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32: return 4;
    case DType::f64:
    case DType::c64: return 8;
    case DType::c128: return 16;
  }
  return 0;
}

bool is_complex(DType t) { return t == DType::c64 || t == DType::c128; }

DType complex_of(DType real) {
  if (real == DType::f32) return DType::c64;
  if (real == DType::f64) return DType::c128;
  throw TypeError(msg("no complex partner of ", dtype_name(real), " (expected float32 or float64)"));
}

std::string device_name(const Device& d) {
  return d.kind == DeviceKind::CPU ? std::string("cpu") : msg("cuda:", d.index);
}

View::View(void* data_, DType dtype_, std::initializer_list<int64_t> shape_, Device device_)
    : data(data_), dtype(dtype_), device(device_), ndim(int(shape_.size())) {
  if (shape_.size() > size_t(kMaxDims))
    throw ValueError(msg("View: at most ", kMaxDims, " axes, got ", shape_.size()));
  std::copy(shape_.begin(), shape_.end(), shape.begin());
  int64_t s = 1;
  for (int i = ndim; i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
}

int64_t View::numel() const {
  int64_t n = 1;
  for (int i = 0; i < std::min(ndim, kMaxDims); ++i) n *= shape[i];
  return n;
}

bool View::contiguous() const {
  if (ndim < 0 || ndim > kMaxDims) return false;
  int64_t expect = 1;
  for (int i = ndim; i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

namespace api {

namespace {
std::string shape_of(const View& v) {
  return shape_str(std::vector<int64_t>(v.shape.begin(), v.shape.begin() + std::clamp(v.ndim, 0, View::kMaxDims)));
}
}  // namespace

void check_view(const View& v, const char* name, DType dt, const Device& dev,
                std::initializer_list<int64_t> shape) {
  check_arg(v.data != nullptr, name, "required, got an empty view");
  check_arg(v.ndim >= 0 && v.ndim <= View::kMaxDims, name, "expected a view of ", shape.size(), " axes, got ndim = ",
            v.ndim, " (a View holds 0 to ", View::kMaxDims, ")");
  if (v.dtype != dt)
    throw TypeError(msg("argument '", name, "': expected dtype ", dtype_name(dt), ", got ", dtype_name(v.dtype)));
  check_arg(v.device == dev, name, "expected an array on ", device_name(dev), ", got one on ",
            device_name(v.device));
  bool same = v.ndim == int(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i) same = v.shape[i] == shape.begin()[i];
  if (!same) check_arg(false, name, "expected shape ", shape_str(shape), ", got ", shape_of(v));
  check_arg(v.contiguous(), name, "expected C-contiguous strides for shape ", shape_of(v),
            " (strides are in elements)");
}

bool matches(const View& v, DType dt, const Device& dev, std::initializer_list<int64_t> shape) {
  bool ok = v.data && v.ndim >= 0 && v.ndim <= View::kMaxDims && v.dtype == dt && v.device == dev && v.ndim == int(shape.size()) && v.contiguous();
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = v.shape[i] == shape.begin()[i];
  return ok;
}

bool check_optional(const View& v, const char* name, DType dt, const Device& dev,
                    std::initializer_list<int64_t> shape) {
  if (v.empty()) return false;
  check_view(v, name, dt, dev, shape);
  return true;
}

namespace {
// The bytes [lo, hi) a view can touch (any strides); lo == hi for a view with a zero-size axis.
std::pair<uintptr_t, uintptr_t> byte_range(const View& v) {
  const int64_t e = int64_t(dtype_size(v.dtype));
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 0) return {0, 0};
    const int64_t span = (v.shape[i] - 1) * v.strides[i];
    (span < 0 ? lo : hi) += span;
  }
  const auto base = reinterpret_cast<uintptr_t>(v.data);
  return {base + uintptr_t(lo * e), base + uintptr_t((hi + 1) * e)};
}
bool intersect(std::pair<uintptr_t, uintptr_t> a, std::pair<uintptr_t, uintptr_t> b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}
}  // namespace

void check_overlaps(const std::vector<Named>& outputs, const std::vector<Named>& inputs, bool in_place) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const View& o = *outputs[i].v;
    if (o.empty()) continue;
    const auto r = byte_range(o);
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (!outputs[j].v->empty())
        check_arg(!intersect(r, byte_range(*outputs[j].v)), outputs[i].name.c_str(), "expected memory apart from '",
                  outputs[j].name, "' (two outputs), got overlapping arrays");
    for (const Named& in : inputs) {
      if (in.v->empty()) continue;
      const auto q = byte_range(*in.v);
      if (!intersect(r, q)) continue;
      check_arg(in_place && r == q, outputs[i].name.c_str(), "expected memory apart from '", in.name,
                in_place ? "' or the very same array, got a partial overlap" : "', got overlapping arrays");
    }
  }
}

void* check_workspace(const Workspace& ws, size_t need) {
  if (!ws.data) return nullptr;
  check_arg(ws.bytes >= need, "workspace", "expected at least ", need, " bytes (workspace_bytes()), got ",
            ws.bytes);
  return ws.data;
}

int solver_index(const Options& o, const char* where, std::initializer_list<const char*> names) {
  if (o.solver.empty()) return 0;
  int i = 0;
  std::string list;
  for (const char* n : names) {
    if (i > 0 && o.solver == n) return i;
    list += (i ? ", \"" : "\"") + std::string(i ? n : "") + "\"";
    ++i;
  }
  throw ValueError(msg("argument 'options.solver': ", where, " accepts ", list, "; got \"", o.solver, "\""));
}

void no_cuda(const Device& d) {
  throw ValueError(msg("argument 'problem.device': ", device_name(d),
                       " needs the CUDA backend, and this build of strux has none (built without "
                       "STRUX_HAVE_CUDA)"));
}

std::string dims(std::initializer_list<int64_t> s) { return shape_str(s); }

}  // namespace api
}  // namespace strux
