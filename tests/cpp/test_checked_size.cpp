// core/checked_size.hpp: overflow-checked size products and the out-of-memory context.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <new>
#include <string>

#include "core/checked_size.hpp"
#include "cpu/fft.hpp"

namespace {

TEST(CheckedSize, ProductsAndOverflow) {
  EXPECT_EQ(strux::checked_count("x", {2, 3, 7}), 42);
  EXPECT_EQ(strux::checked_count("x", {}), 1);
  EXPECT_EQ(strux::checked_count("x", {0, int64_t(1) << 62}), 0);
  // 2^62 * 4 = 2^64 wraps to 0 in unsigned arithmetic: the wrap the binding used to allocate
  try {
    strux::checked_count("nt", {int64_t(1) << 62, 2, 2});
    FAIL() << "no error";
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'nt'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(strux::checked_count("x", {-1, 2}), strux::ValueError);
  EXPECT_THROW(strux::checked_count("x", {int64_t(1) << 32, (int64_t(1) << 32) + 1}), strux::ValueError);
}

TEST(CheckedSize, BytesCappedAsMemoryError) {
  EXPECT_EQ(strux::checked_bytes("x", {4, 5}, 8), 160);
  try {
    strux::checked_bytes("blocks", {int64_t(1) << 40, 1 << 10}, 16);
    FAIL() << "no error";
  } catch (const strux::MemoryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("argument 'blocks'"), std::string::npos) << m;
    EXPECT_NE(m.find("bytes"), std::string::npos) << m;
  }
}

TEST(CheckedSize, OutOfMemoryNamesTheArgument) {
  try {
    strux::with_oom_context("u", []() -> int { throw std::bad_alloc(); });
    FAIL() << "no error";
  } catch (const strux::MemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'u'"), std::string::npos) << e.what();
  }
  // A buffer that could never be allocated: MemoryError with the byte count, then the argument.
  try {
    strux::with_oom_context("k", [] { strux::cpu::AlignedBuffer<double> b(int64_t(1) << 61); });
    FAIL() << "no error";
  } catch (const strux::MemoryError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("argument 'k': out of memory allocating", 0), 0u) << m;
  }
  EXPECT_EQ(strux::with_oom_context("x", [] { return 7; }), 7);
}

TEST(CheckedSize, ThreadCountsBounded) {
  EXPECT_THROW(strux::cpu::set_num_threads(100000), strux::ValueError);
  EXPECT_THROW(strux::cpu::set_num_threads(-1), strux::ValueError);
  strux::cpu::set_num_threads(0);
}

}  // namespace
