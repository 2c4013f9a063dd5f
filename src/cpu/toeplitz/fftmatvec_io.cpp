// Matrices and vectors in the FFTMatvec file format: a text meta_adj plus HDF5 files (C API).
//
// Errors name the file. Reading is lenient where FFTMatvec's own data varies (its test matrices
// have an eight-line meta_adj without the checksum line and the prefix "adj/vec_").
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/checked_size.hpp"
#include "strux/toeplitz.hpp"

#ifdef STRUX_HAVE_HDF5
#include <hdf5.h>
#endif

namespace fs = std::filesystem;

namespace strux {

namespace {

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

int64_t parse_int(const std::string& tok, const std::string& file, int line, const char* what) {
  size_t used = 0;
  long long v = 0;
  bool ok = !tok.empty();
  if (ok) {
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || used != tok.size())
    throw ValueError(msg("file '", file, "': line ", line, " (", what, ") should be an integer, got '",
                         tok, "'"));
  return v;
}

// A file name from meta_adj (or a prefix argument) stays inside the matrix directory: relative,
// no '..' component. Checked on the text before the file system is touched, so a crafted
// meta_adj learns nothing about paths outside the directory (the error never says whether they
// exist). `what` names the source in the message.
void check_confined(const std::string& name, const std::string& what) {
  const fs::path p(name);
  bool ok = !name.empty() && name.find('\0') == std::string::npos && !p.has_root_path();
  for (const auto& part : p)
    if (part == "..") ok = false;
  if (!ok)
    throw ValueError(msg(what, ": expected a file name relative to the matrix directory (sub-folders "
                         "such as 'adj/' allowed; no absolute path, no '..'), got '", name, "'"));
}

// The same after the file system resolved symbolic links: `path` (existing or about to be
// created) must lie below `base`.
void check_below(const fs::path& base, const fs::path& path, const std::string& what) {
  std::error_code e1, e2;
  fs::path b = fs::weakly_canonical(base, e1);
  const fs::path q = fs::weakly_canonical(path, e2);
  if (!b.has_filename()) b = b.parent_path();
  const auto mis = std::mismatch(b.begin(), b.end(), q.begin(), q.end());
  if (e1 || e2 || mis.first != b.end())
    throw ValueError(msg(what, ": resolves (through a symbolic link) outside the matrix directory"));
}

// The meta_adj of `dir`: dir/meta_adj, dir/binary/meta_adj (an FFTMatvec matrix root), or `dir`
// itself when it names the file.
fs::path find_meta(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (fs::is_regular_file(d, ec)) return d;
  for (const fs::path& p : {d / "meta_adj", d / "binary" / "meta_adj"})
    if (fs::is_regular_file(p, ec)) {
      // A meta_adj linked from elsewhere would be read (and its lines echoed in errors).
      check_below(d, p, msg("file '", p.string(), "'"));
      return p;
    }
  if (!fs::exists(d, ec))
    throw ValueError(msg("argument 'directory': '", dir, "' does not exist"));
  throw ValueError(msg("argument 'directory': no file meta_adj in '", dir, "' (nor in '",
                       (d / "binary").string(), "')"));
}

}  // namespace

FFTMatvecMeta read_fftmatvec_meta(const std::string& dir) {
  const fs::path path = find_meta(dir);
  const std::string file = path.string();
  std::ifstream in(path);
  if (!in) throw ValueError(msg("file '", file, "': cannot be opened for reading"));
  // Blank lines and surrounding whitespace (also '\r' of files written on Windows) are ignored.
  std::vector<std::string> v;
  std::vector<int> lineno;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string t = trim(line);
    if (!t.empty()) {
      v.push_back(t);
      lineno.push_back(n);
    }
  }
  if (v.size() < 8)
    throw ValueError(msg("file '", file, "': expected nine lines (Nd, Nm, Nt, prefix, extension, "
                         "reindexed, is_p2q, reverse_dof, checksum), got ", v.size()));
  FFTMatvecMeta m;
  m.meta_path = file;
  m.nd = parse_int(v[0], file, lineno[0], "Nd");
  m.nm = parse_int(v[1], file, lineno[1], "Nm");
  m.nt = parse_int(v[2], file, lineno[2], "Nt");
  m.prefix = v[3];
  m.extension = v[4];
  m.reindexed = parse_int(v[5], file, lineno[5], "reindexed");
  m.is_p2q = parse_int(v[6], file, lineno[6], "is_p2q");
  m.reverse_dof = parse_int(v[7], file, lineno[7], "reverse_dof");
  if (v.size() > 8) m.checksum = parse_int(v[8], file, lineno[8], "checksum");
  // FFTMatvec parses the checksum with std::stoi and stores it as an int attribute.
  if (m.checksum < INT32_MIN || m.checksum > INT32_MAX)
    throw ValueError(msg("file '", file, "': checksum ", m.checksum, " does not fit 32 bits"));
  const char* names[3] = {"Nd", "Nm", "Nt"};
  const int64_t sizes[3] = {m.nd, m.nm, m.nt};
  for (int i = 0; i < 3; ++i)
    if (sizes[i] < 1)
      throw ValueError(msg("file '", file, "': ", names[i], " should be >= 1, got ", sizes[i]));
  if (m.reindexed != 1)
    throw ValueError(msg("file '", file, "': reindexed = ", m.reindexed,
                         " (time-major block rows) is not supported; FFTMatvec files have 1"));
  if (m.reverse_dof != 1)
    throw ValueError(msg("file '", file, "': reverse_dof = ", m.reverse_dof,
                         " is not supported; FFTMatvec files have 1"));
  return m;
}

#ifdef STRUX_HAVE_HDF5

bool have_hdf5() { return true; }

namespace {

// The HDF5 library of this build is not thread-safe: one lock around every use.
std::mutex& h5_mutex() {
  static std::mutex m;
  return m;
}

// Owns one hid_t.
struct H5Id {
  hid_t id;
  herr_t (*close)(hid_t);
  H5Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() {
    if (id >= 0 && close) close(id);
  }
  bool ok() const { return id >= 0; }
};

// HDF5 prints its error stack to stderr by default; we raise instead.
struct QuietH5 {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  std::lock_guard<std::mutex> lock{h5_mutex()};
  QuietH5() {
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietH5() {
    H5Eclear2(H5E_DEFAULT);  // a failure's error stack is ours: nothing of it outlives the call
    H5Eset_auto2(H5E_DEFAULT, func, data);
  }
};

// An integer attribute of `obj` if present.
bool int_attr(hid_t obj, const char* name, int64_t* out, const std::string& file) {
  htri_t e = H5Aexists(obj, name);
  if (e <= 0) return false;
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5Id sp(a.ok() ? H5Aget_space(a.id) : -1, H5Sclose);
  H5Id type(a.ok() ? H5Aget_type(a.id) : -1, H5Tclose);
  const H5T_class_t cls = type.ok() ? H5Tget_class(type.id) : H5T_NO_CLASS;
  long long v = 0;
  bool ok = a.ok() && sp.ok() && H5Sget_simple_extent_npoints(sp.id) == 1;
  if (ok && cls == H5T_INTEGER) {
    ok = H5Aread(a.id, H5T_NATIVE_LLONG, &v) >= 0;
  } else if (ok && cls == H5T_FLOAT) {
    // HDF5 would truncate 4.7 to 4: a floating attribute counts only when it holds an integer.
    double x = 0;
    ok = H5Aread(a.id, H5T_NATIVE_DOUBLE, &x) >= 0 && std::isfinite(x) && x == std::floor(x) &&
         std::fabs(x) <= 9007199254740992.0;
    if (ok) v = static_cast<long long>(x);
  } else {
    ok = false;
  }
  if (!ok)
    throw ValueError(msg("file '", file, "': attribute '", name, "' of dataset 'vec' is not one integer"));
  *out = v;
  return true;
}

struct Dataset {
  std::string file;
  H5Id f{-1, H5Fclose};
  H5Id d{-1, H5Dclose};
  int64_t npoints = 0;

  explicit Dataset(const std::string& path) : file(path) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (!fs::exists(st)) throw ValueError(msg("file '", path, "' does not exist"));
    if (!fs::is_regular_file(st))
      throw ValueError(msg("file '", path, "': expected an HDF5 file, got ",
                           fs::is_directory(st) ? "a folder" : "a device or other special file",
                           " (not a regular file)"));
    f.id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (!f.ok()) throw ValueError(msg("file '", path, "': not a readable HDF5 file"));
    d.id = H5Dopen2(f.id, "vec", H5P_DEFAULT);
    if (!d.ok()) throw ValueError(msg("file '", path, "': has no dataset 'vec'"));
    H5Id sp(H5Dget_space(d.id), H5Sclose);
    if (!sp.ok()) throw ValueError(msg("file '", path, "': cannot read the shape of dataset 'vec'"));
    npoints = int64_t(H5Sget_simple_extent_npoints(sp.id));
  }
  bool attr(const char* name, int64_t* v) const { return int_attr(d.id, name, v, file); }
  void expect_attr(const char* name, int64_t want, const char* what) const {
    int64_t v = 0;
    if (attr(name, &v) && v != want)
      throw ValueError(msg("file '", file, "': attribute ", name, " = ", v, ", expected ", want, " (",
                           what, ")"));
  }
  // The dataset's bytes on disk cover `count` values: a small file cannot declare (through a
  // compressed or never-written dataset) more values than it holds and so size a huge buffer.
  void check_stored(int64_t count) const {
    H5Id type(H5Dget_type(d.id), H5Tclose);
    const int64_t elem = type.ok() ? int64_t(H5Tget_size(type.id)) : 0;
    const int64_t stored = int64_t(H5Dget_storage_size(d.id));
    if (elem < 1 || count > stored / elem)
      throw ValueError(msg("file '", file, "': dataset 'vec' stores ", stored, " bytes, too few for its ",
                           count, " values (compressed or unwritten datasets are not read)"));
  }
  // Values [first, first + count) of the dataset (all of it: first = 0, count = npoints).
  void read(double* out, int64_t first = 0, int64_t count = -1) const {
    const bool all = first == 0 && (count < 0 || count == npoints);
    H5Id file_sp(all ? H5S_ALL : H5Dget_space(d.id), all ? nullptr : H5Sclose);
    const hsize_t start = hsize_t(first), n = hsize_t(count);
    H5Id mem_sp(all ? H5S_ALL : H5Screate_simple(1, &n, nullptr), all ? nullptr : H5Sclose);
    if ((!all && (!file_sp.ok() || !mem_sp.ok() ||
                  H5Sselect_hyperslab(file_sp.id, H5S_SELECT_SET, &start, nullptr, &n, nullptr) < 0)) ||
        H5Dread(d.id, H5T_NATIVE_DOUBLE, mem_sp.id, file_sp.id, H5P_DEFAULT, out) < 0)
      throw ValueError(msg("file '", file, "': dataset 'vec' could not be read as numbers"));
  }
};

// errno in words, for messages about files the operating system refused.
std::string os_reason(int err) { return err ? std::string(": ") + std::strerror(err) : std::string(); }

// Creates (or truncates) `path` as a plain file first, so that the operating system's refusal
// arrives with errno, and HDF5 is only ever handed a regular file (HDF5 1.10 leaks internal
// state on a failed H5Fcreate of a device or a folder and prints garbage at exit).
void create_plain_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw ValueError(msg("file '", path, "': cannot be created: the name is taken by a folder or a device"));
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw ValueError(msg("file '", path, "': cannot be created", os_reason(errno)));
  std::fclose(f);
}

void write_h5(const std::string& path, const double* x, int64_t count,
              const std::vector<std::pair<const char*, int64_t>>& attrs) {
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) throw ValueError(msg("file '", path, "': cannot create its folder: ", ec.message()));
  for (const auto& [name, value] : attrs)  // 32-bit integers, as FFTMatvec (HighFive <int>) writes them
    if (value > INT32_MAX || value < INT32_MIN)
      throw ValueError(msg("file '", path, "': attribute ", name, " = ", value, " does not fit 32 bits"));
  create_plain_file(path);
  try {
    H5Id f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!f.ok()) throw ValueError(msg("file '", path, "': HDF5 cannot create it", os_reason(errno)));
    hsize_t dims[1] = {hsize_t(count)};
    H5Id sp(H5Screate_simple(1, dims, nullptr), H5Sclose);
    H5Id d(sp.ok() ? H5Dcreate2(f.id, "vec", H5T_IEEE_F64LE, sp.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1,
           H5Dclose);
    errno = 0;
    if (!d.ok() || H5Dwrite(d.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0)
      throw BackendError(msg("file '", path, "': writing dataset 'vec' failed", os_reason(errno)));
    H5Id scalar(H5Screate(H5S_SCALAR), H5Sclose);
    for (const auto& [name, value] : attrs) {
      const int v32 = int(value);
      H5Id a(H5Acreate2(d.id, name, H5T_STD_I32LE, scalar.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      if (!a.ok() || H5Awrite(a.id, H5T_NATIVE_INT, &v32) < 0)
        throw BackendError(msg("file '", path, "': writing attribute ", name, " failed", os_reason(errno)));
    }
    errno = 0;
    if (H5Fflush(f.id, H5F_SCOPE_LOCAL) < 0)
      throw BackendError(msg("file '", path, "': flushing failed", os_reason(errno)));
  } catch (...) {
    H5Eclear2(H5E_DEFAULT);
    fs::remove(p, ec);  // no half-written file stays behind
    throw;
  }
}

std::string row_name(const std::string& prefix, int64_t row, const std::string& ext) {
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%06lld", static_cast<long long>(row));
  return prefix + digits + ext;
}

}  // namespace

std::vector<double> read_fftmatvec(const std::string& dir, FFTMatvecMeta* meta_out) {
  return read_fftmatvec_part(dir, 0, -1, 0, -1, meta_out);
}

std::vector<double> read_fftmatvec_part(const std::string& dir, int64_t row0, int64_t row1, int64_t col0,
                                        int64_t col1, FFTMatvecMeta* meta_out) {
  const FFTMatvecMeta meta = read_fftmatvec_meta(dir);
  const int64_t nd = meta.nd, nm = meta.nm, nt = meta.nt;
  if (row1 < 0) row1 = nd;
  if (col1 < 0) col1 = nm;
  check_arg(0 <= row0 && row0 < row1 && row1 <= nd, "rows", "expected 0 <= begin < end <= Nd = ", nd, ", got [",
            row0, ", ", row1, ")");
  check_arg(0 <= col0 && col0 < col1 && col1 <= nm, "cols", "expected 0 <= begin < end <= Nm = ", nm, ", got [",
            col0, ", ", col1, ")");
  const int64_t rows = row1 - row0, cols = col1 - col0;
  const std::string& mp = meta.meta_path;
  const fs::path base = fs::path(mp).parent_path();
  check_confined(row_name(meta.prefix, 0, meta.extension), msg("file '", mp, "': prefix and extension"));
  // One row holds Nm*Nt values; nothing is sized until row 0 has shown it holds them.
  const int64_t per_row = checked_count("directory", {nm, nt});
  QuietH5 quiet;
  // The prefix is relative to meta_adj's folder; bare prefixes may also live in adj/.
  // Both candidate paths are checked to stay inside before either is looked at, so that the
  // error of a missing row says nothing about a place outside the directory.
  auto row_path = [&](int64_t r) {
    const std::string name = row_name(meta.prefix, r, meta.extension);
    fs::path path = base / name;
    const fs::path alt = base / "adj" / name;
    const std::string what = msg("file '", path.string(), "' (block row ", r, " named in '", mp, "')");
    check_below(base, path, what);
    check_below(base, alt, what);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec) && fs::is_regular_file(alt, ec)) path = alt;
    if (!fs::is_regular_file(path, ec))
      throw ValueError(msg("file '", path.string(), "' (block row ", r, " of ", nd, " named in '", mp,
                           "') does not exist",
                           (name.find('/') == std::string::npos
                                ? msg(" (nor does '", (base / "adj" / name).string(), "')")
                                : std::string())));
    return path;
  };
  auto open_row = [&](int64_t r) {
    auto owned = std::make_unique<Dataset>(row_path(r).string());
    const Dataset& ds = *owned;
    if (ds.npoints != per_row)
      throw ValueError(msg("file '", ds.file, "': dataset 'vec' has ", ds.npoints,
                           " values, expected Nm*Nt = ", nm, "*", nt, " = ", per_row, " (sizes from '", mp,
                           "')"));
    ds.check_stored(per_row);
    ds.expect_attr("n_param", nm, "Nm from meta_adj");
    ds.expect_attr("param_steps", nt, "Nt from meta_adj");
    ds.expect_attr("reindex", 1, "space-major order");
    // As FFTMatvec checks it: a nonzero checksum in meta_adj must be every row's attribute.
    if (meta.checksum != 0) {
      int64_t c = 0;
      if (!ds.attr("checksum", &c))
        throw ValueError(msg("file '", ds.file, "': no attribute 'checksum' on dataset 'vec', but '", mp,
                             "' declares checksum ", meta.checksum));
      if (c != meta.checksum)
        throw ValueError(msg("file '", ds.file, "': checksum ", c, " does not match ", meta.checksum,
                             " declared in '", mp, "'"));
    }
    return owned;
  };
  open_row(row0);
  // Every row file must exist and be large enough before Nd rows are allocated: a meta_adj
  // declaring 2^40 rows beside two files fails at the third, having allocated nothing.
  const int64_t row_bytes = checked_bytes("directory", {per_row}, int64_t(sizeof(double)));
  for (int64_t r = row0 + 1; r < row1; ++r) {
    const fs::path path = row_path(r);
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec || int64_t(size) < row_bytes)
      throw ValueError(msg("file '", path.string(), "': ", ec ? std::string("size unreadable")
                                                              : msg(size, " bytes"),
                           ", too small for the Nm*Nt = ", per_row, " values declared in '", mp, "'"));
  }
  const int64_t total = checked_bytes("directory", {nt, rows, cols}, 8) / 8;
  // A row file holds vec[m·Nt + t]: the columns [col0, col1) are one contiguous range of it.
  std::vector<double> blocks(static_cast<size_t>(total)), row(static_cast<size_t>(cols * nt));
  for (int64_t r = 0; r < rows; ++r) {
    open_row(row0 + r)->read(row.data(), col0 * nt, cols * nt);
    for (int64_t m = 0; m < cols; ++m)
      for (int64_t t = 0; t < nt; ++t) blocks[size_t((t * rows + r) * cols + m)] = row[size_t(m * nt + t)];
  }
  if (meta_out) *meta_out = meta;
  return blocks;
}

void write_fftmatvec(const std::string& dir, const double* blocks, int64_t nt, int64_t nd,
                     int64_t nm, const std::string& prefix, int64_t is_p2q, int64_t checksum) {
  check_arg(blocks != nullptr, "blocks", "expected a data pointer, got null");
  check_positive(nt, "Nt");
  check_positive(nd, "Nd");
  check_positive(nm, "Nm");
  check_arg(!prefix.empty() && prefix.find('\n') == std::string::npos && prefix.find('\r') == std::string::npos,
            "prefix", "expected a non-empty one-line file name prefix, got '", prefix, "'");
  // meta_adj lines are read back with surrounding whitespace stripped: such a prefix would name
  // files the reader never finds.
  check_arg(trim(prefix) == prefix, "prefix", "expected no leading or trailing whitespace (meta_adj lines are read "
            "trimmed), got '", prefix, "'");
  check_confined(prefix, "argument 'prefix'");
  // FFTMatvec reads these with std::stoi and HighFive int attributes.
  check_arg(checksum >= INT32_MIN && checksum <= INT32_MAX, "checksum", "expected a 32-bit integer, got ",
            checksum);
  check_arg(is_p2q >= INT32_MIN && is_p2q <= INT32_MAX, "is_p2q", "expected a 32-bit integer, got ", is_p2q);
  const int64_t per_row = checked_count("blocks", {nm, nt});
  checked_bytes("blocks", {per_row}, int64_t(sizeof(double)));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ValueError(msg("argument 'directory': cannot create '", dir, "': ", ec.message()));
  const fs::path base(dir);
  check_below(base, base / prefix, "argument 'prefix'");
  std::vector<double> row(static_cast<size_t>(per_row));
  std::vector<std::string> written;
  try {
    for (int64_t r = 0; r < nd; ++r) {
      for (int64_t m = 0; m < nm; ++m)
        for (int64_t t = 0; t < nt; ++t) row[size_t(m * nt + t)] = blocks[size_t((t * nd + r) * nm + m)];
      std::vector<std::pair<const char*, int64_t>> attrs = {
          {"reindex", 1}, {"n_param", nm}, {"param_steps", nt}};
      if (checksum != 0) attrs.push_back({"checksum", checksum});
      const std::string path = (base / row_name(prefix, r, ".h5")).string();
      check_below(base, path, msg("file '", path, "'"));  // an existing link out is not followed
      written.push_back(path);
      write_h5(path, row.data(), per_row, attrs);
    }
    // meta_adj last: a directory whose write failed part-way has no meta_adj naming its rows.
    const std::string mp = (base / "meta_adj").string();
    check_below(base, mp, msg("file '", mp, "'"));
    written.push_back(mp);
    errno = 0;
    std::ofstream out(mp);
    out << nd << '\n' << nm << '\n' << nt << '\n' << prefix << "\n.h5\n1\n" << is_p2q << "\n1\n"
        << checksum << '\n';
    out.flush();
    if (!out) throw ValueError(msg("file '", mp, "': writing failed", os_reason(errno)));
  } catch (...) {
    for (const std::string& f : written) fs::remove(f, ec);
    throw;
  }
}

VectorFile read_vector_file(const std::string& path) {
  QuietH5 quiet;
  const Dataset ds(path);
  VectorFile v;
  int64_t n = 0, steps = 0;
  const bool param = ds.attr("n_param", &n) && ds.attr("param_steps", &steps);
  int64_t n2 = 0, steps2 = 0;
  const bool obs = ds.attr("n_obs", &n2) && ds.attr("obs_steps", &steps2);
  if (param == obs)
    throw ValueError(msg("file '", path, "': dataset 'vec' should have the attributes n_param and ",
                         "param_steps (parameter space) or n_obs and obs_steps (observation ",
                         "space); it has ", param ? "both" : "neither"));
  if (obs) {
    n = n2;
    steps = steps2;
  }
  if (n < 1 || steps < 1 || n > INT32_MAX || steps > INT32_MAX || ds.npoints != n * steps)
    throw ValueError(msg("file '", path, "': dataset 'vec' has ", ds.npoints, " values, expected ",
                         obs ? "n_obs*obs_steps = " : "n_param*param_steps = ", n, "*", steps));
  ds.expect_attr("reindex", 1, "space-major order");
  ds.check_stored(ds.npoints);
  v.n = n;
  v.nt = steps;
  v.space = obs ? VectorSpace::Obs : VectorSpace::Param;
  v.data.resize(size_t(n * steps));
  ds.read(v.data.data());
  return v;
}

void write_vector_file(const std::string& path, const double* x, int64_t n, int64_t nt,
                       VectorSpace space) {
  check_arg(x != nullptr, "x", "expected a data pointer, got null");
  check_positive(n, "n");
  check_positive(nt, "nt");
  QuietH5 quiet;
  if (space == VectorSpace::Param)
    write_h5(path, x, n * nt, {{"n_param", n}, {"param_steps", nt}, {"reindex", 1}});
  else
    write_h5(path, x, n * nt, {{"n_obs", n}, {"obs_steps", nt}, {"reindex", 1}});
}

#else  // no HDF5 in this build

bool have_hdf5() { return false; }

namespace {
[[noreturn]] void no_hdf5() {
  throw BackendError("strux was built without HDF5 (STRUX_HAVE_HDF5): FFTMatvec files are unavailable");
}
}  // namespace

std::vector<double> read_fftmatvec(const std::string&, FFTMatvecMeta*) { no_hdf5(); }
std::vector<double> read_fftmatvec_part(const std::string&, int64_t, int64_t, int64_t, int64_t, FFTMatvecMeta*) {
  no_hdf5();
}
void write_fftmatvec(const std::string&, const double*, int64_t, int64_t, int64_t, const std::string&,
                     int64_t, int64_t) {
  no_hdf5();
}
VectorFile read_vector_file(const std::string&) { no_hdf5(); }
void write_vector_file(const std::string&, const double*, int64_t, int64_t, VectorSpace) { no_hdf5(); }

#endif

}  // namespace strux
