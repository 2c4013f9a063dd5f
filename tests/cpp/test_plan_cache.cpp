// The plan cache (src/core/plan_cache.hpp): one plan per key, built once, least recently used
// dropped past the capacity, clear_plan_caches() empties every cache, plans held by callers
// outlive eviction, and concurrent lookups of one key build one plan.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "core/plan_cache.hpp"

namespace {

using strux::core::PlanCache;
using strux::core::PlanKey;

struct Plan {
  explicit Plan(int64_t v) : v(v) { ++alive; }
  ~Plan() { --alive; }
  int64_t v;
  static inline std::atomic<int> alive{0};
};

TEST(PlanCache, BuildsOncePerKeyAndEvictsLeastRecentlyUsed) {
  PlanCache<PlanKey<2>, Plan> cache(2);
  int built = 0;
  auto make = [&](int64_t v) { return [&built, v] { ++built; return std::make_shared<Plan>(v); }; };
  auto p1 = cache.get({1, 0}, make(1));
  EXPECT_EQ(cache.get({1, 0}, make(9))->v, 1);
  EXPECT_EQ(built, 1);
  cache.get({2, 0}, make(2));
  cache.get({1, 0}, make(9));  // 1 is now the most recent: 2 goes first
  cache.get({3, 0}, make(3));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find({2, 0}), nullptr);
  EXPECT_NE(cache.find({1, 0}), nullptr);
  EXPECT_EQ(built, 3);
}

TEST(PlanCache, ClearDropsEveryCacheButNotPlansInUse) {
  PlanCache<PlanKey<1>, Plan> a(4), b(4);
  auto held = a.get({7}, [] { return std::make_shared<Plan>(7); });
  b.get({8}, [] { return std::make_shared<Plan>(8); });
  const int before = Plan::alive;
  strux::core::clear_plan_caches();
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(Plan::alive, before - 1);  // b's plan is gone, a's is still held here
  EXPECT_EQ(held->v, 7);
}

TEST(PlanCache, ConcurrentLookupsBuildOnePlan) {
  PlanCache<PlanKey<1>, Plan> cache(8);
  std::atomic<int> built{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 100; ++i)
        cache.get({i % 4}, [&] { ++built; return std::make_shared<Plan>(i % 4); });
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(built, 4);
}

}  // namespace
