// The plan cache: one bounded, thread-safe LRU map from a problem key to a shared plan, the type
// every binding keeps its plans in (like pocketfft's plan cache). A key packs what a plan's
// construction depends on -- the problem (shapes, dtype, layout), the options and the device --
// into a fixed array of integers. clear_plan_caches() empties every cache (each one at its next
// use, so that no lock spans caches); a plan still held by a running call stays alive until that
// call returns (shared ownership).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace strux::core {

template <size_t N>
using PlanKey = std::array<int64_t, N>;

struct PlanKeyHash {
  template <size_t N>
  size_t operator()(const PlanKey<N>& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
    for (int64_t v : k) h = (h ^ uint64_t(v)) * 1099511628211ull;
    return size_t(h);
  }
};

// Bumped by clear_plan_caches(); a cache that sees a newer value drops its plans.
inline std::atomic<uint64_t>& plan_cache_generation() {
  static std::atomic<uint64_t> g{0};
  return g;
}

inline void clear_plan_caches() { plan_cache_generation().fetch_add(1, std::memory_order_relaxed); }

template <class Key, class Plan>
class PlanCache {
 public:
  explicit PlanCache(size_t capacity) : cap_(capacity < 1 ? 1 : capacity) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The plan of `key`, made by make() (returning a std::shared_ptr<Plan>) when absent; the least
  // recently used plan is dropped past the capacity. make() runs under the cache's lock, so a
  // plan is built once however many threads ask for it.
  template <class Make>
  std::shared_ptr<Plan> get(const Key& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    sync();
    if (auto p = find_locked(key)) return p;
    std::shared_ptr<Plan> p = make();
    lru_.emplace_front(key, p);
    map_[key] = lru_.begin();
    while (map_.size() > cap_) {
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return p;
  }

  // The plan of `key` if cached (marked as used), else null.
  std::shared_ptr<Plan> find(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    sync();
    return find_locked(key);
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    sync();
    return map_.size();
  }

 private:
  void sync() {
    const uint64_t g = plan_cache_generation().load(std::memory_order_relaxed);
    if (g != gen_) {
      map_.clear();
      lru_.clear();
      gen_ = g;
    }
  }
  std::shared_ptr<Plan> find_locked(const Key& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  using Entry = std::pair<Key, std::shared_ptr<Plan>>;
  std::mutex mu_;
  size_t cap_;
  uint64_t gen_ = plan_cache_generation().load();
  std::list<Entry> lru_;
  std::unordered_map<Key, typename std::list<Entry>::iterator, PlanKeyHash> map_;
};

}  // namespace strux::core
