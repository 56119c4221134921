#include "engine/plan_cache.h"

#include "engine/graph.h"

#include <llvm/ADT/DenseMap.h>

#include <list>

namespace kiln::detail {

namespace {

struct Cache {
  std::list<std::shared_ptr<CachedPlan>> lru; // most recently used first
  llvm::DenseMap<uint64_t, std::list<std::shared_ptr<CachedPlan>>::iterator> by_hash;
  llvm::DenseMap<uint64_t, uint64_t> by_token_hash; // a plan's token hash -> its hash
};

Cache& cache() {
  static auto* c = new Cache; // never destroyed: entries may hold GPU state past main
  return *c;
}

// `p` leaves the cache: its token hash no longer finds it.
void forget_token_hash(Cache& c, const CachedPlan& p) {
  if (p.token_key.empty()) return;
  if (auto it = c.by_token_hash.find(p.token_hash);
      it != c.by_token_hash.end() && it->second == p.hash)
    c.by_token_hash.erase(it);
}

// Keep `p` as the most recently used plan for its hash; a different graph with the same hash
// gives way (the newer one wins).
void remember(const std::shared_ptr<CachedPlan>& p) {
  Cache& c = cache();
  if (auto it = c.by_hash.find(p->hash); it != c.by_hash.end()) {
    if (it->second->get() != p.get()) forget_token_hash(c, **it->second);
    c.lru.erase(it->second);
    c.by_hash.erase(it);
  }
  c.lru.push_front(p);
  c.by_hash[p->hash] = c.lru.begin();
  trim_plan_cache();
}

} // namespace

std::shared_ptr<CachedPlan> last_plan() {
  Cache& c = cache();
  return c.lru.empty() ? nullptr : c.lru.front();
}

ExpectedKey expected_key(const std::shared_ptr<CachedPlan>& p, bool spelled) {
  if (!p) return {};
  if (!spelled && !p->token_key.empty()) return {&p->token_key, p->token_hash};
  return {&p->key, p->hash};
}

std::shared_ptr<CachedPlan> plan_for(const Walk& w, const std::shared_ptr<CachedPlan>& guess) {
  EngineState& e = engine();
  Cache& c = cache();
  if (w.matched && guess) { // the walk found guess's key: guess is this evaluation's plan
    e.stats.plan_hits++;
    e.plans_reused_in_a_row++;
    auto it = c.by_hash.find(guess->hash);
    if (it != c.by_hash.end() && it->second->get() == guess.get())
      c.lru.splice(c.lru.begin(), c.lru, it->second); // now the most recently used
    else
      remember(guess); // evicted since the walk (nothing does that today): cached again
    return guess;
  }
  auto it = c.by_hash.find(w.hash);
  if (it != c.by_hash.end() && (*it->second)->key == w.key) {
    e.stats.plan_hits++;
    e.plans_reused_in_a_row++;
    c.lru.splice(c.lru.begin(), c.lru, it->second); // now the most recently used
    return c.lru.front();
  }
  e.stats.plan_misses++;
  e.plans_reused_in_a_row = 0;
  auto p = std::make_shared<CachedPlan>();
  p->schedule = std::make_shared<Schedule>(plan(w));
  if (e.max_plans == 0) return p;
  p->key = w.key;
  p->hash = w.hash;
  remember(p);
  return p;
}

bool plan_cached(const Walk& w) {
  if (w.matched) return true; // its guess is the last plan, still cached
  Cache& c = cache();
  auto it = c.by_hash.find(w.hash);
  return it != c.by_hash.end() && (*it->second)->key == w.key;
}

std::shared_ptr<CachedPlan> plan_by_tokens(const Walk& w) {
  Cache& c = cache();
  auto t = c.by_token_hash.find(w.hash);
  if (t == c.by_token_hash.end()) return nullptr;
  auto it = c.by_hash.find(t->second);
  if (it == c.by_hash.end() || (*it->second)->token_key != w.key) return nullptr;
  EngineState& e = engine();
  e.stats.plan_hits++;
  e.plans_reused_in_a_row++;
  c.lru.splice(c.lru.begin(), c.lru, it->second); // now the most recently used
  return c.lru.front();
}

void set_token_key(const std::shared_ptr<CachedPlan>& p, std::vector<uint64_t>& key,
                   uint64_t hash) {
  Cache& c = cache();
  forget_token_hash(c, *p);
  p->token_key.swap(key);
  p->token_hash = hash;
  if (auto it = c.by_hash.find(p->hash); it != c.by_hash.end() && it->second->get() == p.get())
    c.by_token_hash[hash] = p->hash; // (a plan not cached, the cache being off, is not found)
}

void trim_plan_cache() {
  EngineState& e = engine();
  Cache& c = cache();
  while (static_cast<int64_t>(c.lru.size()) > e.max_plans) {
    forget_token_hash(c, *c.lru.back());
    c.by_hash.erase(c.lru.back()->hash);
    c.lru.pop_back();
    e.stats.plan_evictions++;
  }
}

} // namespace kiln::detail
