#include "engine/plan_cache.h"

#include "engine/graph.h"

#include <llvm/ADT/DenseMap.h>

#include <list>

namespace kiln::detail {

namespace {

struct Cache {
  std::list<std::shared_ptr<CachedPlan>> lru; // most recently used first
  llvm::DenseMap<uint64_t, std::list<std::shared_ptr<CachedPlan>>::iterator> by_hash;
};

Cache& cache() {
  static auto* c = new Cache; // never destroyed: entries may hold GPU state past main
  return *c;
}

} // namespace

std::shared_ptr<CachedPlan> plan_for(const Walk& w) {
  EngineState& e = engine();
  Cache& c = cache();
  auto it = c.by_hash.find(w.hash);
  if (it != c.by_hash.end() && (*it->second)->key == w.key) {
    e.stats.plan_hits++;
    c.lru.splice(c.lru.begin(), c.lru, it->second); // now the most recently used
    return c.lru.front();
  }
  e.stats.plan_misses++;
  auto p = std::make_shared<CachedPlan>();
  p->schedule = std::make_shared<Schedule>(plan(w));
  if (e.max_plans == 0) return p;
  p->key = w.key;
  p->hash = w.hash;
  if (it != c.by_hash.end()) { // a different graph with the same hash: the newer one wins
    c.lru.erase(it->second);
    c.by_hash.erase(it);
  }
  c.lru.push_front(p);
  c.by_hash[w.hash] = c.lru.begin();
  trim_plan_cache();
  return p;
}

bool plan_cached(const Walk& w) {
  Cache& c = cache();
  auto it = c.by_hash.find(w.hash);
  return it != c.by_hash.end() && (*it->second)->key == w.key;
}

void trim_plan_cache() {
  EngineState& e = engine();
  Cache& c = cache();
  while (static_cast<int64_t>(c.lru.size()) > e.max_plans) {
    c.by_hash.erase(c.lru.back()->hash);
    c.lru.pop_back();
    e.stats.plan_evictions++;
  }
}

} // namespace kiln::detail
