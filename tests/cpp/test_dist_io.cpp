// read_fftmatvec_part (a rank's rows and columns of an FFTMatvec directory, for strux::dist)
// against slices of the whole matrix; only the part's row files are opened.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "strux/toeplitz.hpp"

namespace fs = std::filesystem;

#ifdef STRUX_HAVE_HDF5
TEST(DistFiles, PartIsTheSliceOfTheWhole) {
  const fs::path dir = fs::temp_directory_path() / ("strux_dist_io_" + std::to_string(std::random_device{}()));
  const int64_t nt = 5, nd = 7, nm = 6;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n01;
  std::vector<double> b(size_t(nt * nd * nm));
  for (auto& x : b) x = n01(rng);
  strux::write_fftmatvec(dir.string(), b.data(), nt, nd, nm);
  for (auto [r0, r1, c0, c1] : {std::array<int64_t, 4>{0, 7, 0, 6}, {2, 5, 1, 4}, {6, 7, 5, 6}, {0, 1, 0, 6}}) {
    strux::FFTMatvecMeta meta;
    const auto got = strux::read_fftmatvec_part(dir.string(), r0, r1, c0, c1, &meta);
    ASSERT_EQ(got.size(), size_t(nt * (r1 - r0) * (c1 - c0)));
    EXPECT_EQ(meta.nd, nd);
    for (int64_t t = 0; t < nt; ++t)
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = c0; j < c1; ++j)
          EXPECT_EQ(got[size_t((t * (r1 - r0) + i - r0) * (c1 - c0) + j - c0)], b[size_t((t * nd + i) * nm + j)]);
  }
  EXPECT_EQ(strux::read_fftmatvec_part(dir.string(), 0, -1, 0, -1), b);
  // Rows outside the part are never opened: a missing row 0 does not stop a read of rows 3..4.
  fs::remove(dir / "adj" / "vec_000000.h5");
  EXPECT_EQ(strux::read_fftmatvec_part(dir.string(), 3, 5, 0, 6).size(), size_t(nt * 2 * 6));
  EXPECT_THROW(strux::read_fftmatvec_part(dir.string(), 0, 2, 0, 6), strux::ValueError);
  // Bad ranges name the argument.
  for (auto [r0, r1, c0, c1] : {std::array<int64_t, 4>{3, 3, 0, 6}, {0, 8, 0, 6}, {0, 1, 4, 7}, {-1, 2, 0, 1}}) {
    try {
      strux::read_fftmatvec_part(dir.string(), r0, r1, c0, c1);
      ADD_FAILURE() << "expected a ValueError";
    } catch (const strux::ValueError& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("'rows'") != std::string::npos || m.find("'cols'") != std::string::npos) << m;
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}
#endif
