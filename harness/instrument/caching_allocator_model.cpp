#include "harness/instrument/caching_allocator_model.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace harness::memory {
namespace {

// c10/core/AllocatorConfig.h, and kLargeBuffer of CUDACachingAllocator.cpp.
constexpr int64_t kMinBlockSize = 512;
constexpr int64_t kSmallSize = 1 << 20;
constexpr int64_t kSmallBuffer = 2 << 20;
constexpr int64_t kLargeBuffer = 20 << 20;
constexpr int64_t kMinLargeAlloc = 10 << 20;
constexpr int64_t kRoundLarge = 2 << 20;

}  // namespace

struct CachingAllocatorModel::Block {
  int64_t address = 0, size = 0;
  bool small = false;     // which pool
  bool allocated = false;
  Block* prev = nullptr;  // neighbours in its segment
  Block* next = nullptr;
  // A free block of the small pool: its neighbours in its size class's list, by address.
  Block* free_prev = nullptr;
  Block* free_next = nullptr;
};

struct CachingAllocatorModel::Pools {
  // The large pool's free blocks, in BlockComparatorSize's order: by size, then address.
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return std::tie(a->size, a->address) < std::tie(b->size, b->address);
    }
  };
  std::set<Block*, BySize> large;

  // The small pool's, in the same order, kept by size class (a block's size / 512: at most a
  // whole 2 MiB segment), each class a list by address (few blocks each), with a bit per
  // non-empty class: best fit is the first set bit at or above the request's class. (What a
  // request costs here is paid on every sim allocation: no nodes or arrays to allocate or move.)
  static constexpr int64_t kClasses = kSmallBuffer / kMinBlockSize + 1;
  std::vector<Block*> small = std::vector<Block*>(kClasses, nullptr);  // each class's first
  static constexpr int64_t kWords = (kClasses + 63) / 64;
  std::array<uint64_t, kWords> small_nonempty{};
  std::array<uint64_t, (kWords + 63) / 64> small_words{};  // a bit per non-zero word above

  void mark(int64_t k) {
    small_nonempty[k / 64] |= uint64_t{1} << (k % 64);
    small_words[k / 4096] |= uint64_t{1} << ((k / 64) % 64);
  }
  void unmark(int64_t k) {
    small_nonempty[k / 64] &= ~(uint64_t{1} << (k % 64));
    if (small_nonempty[k / 64] == 0) small_words[k / 4096] &= ~(uint64_t{1} << ((k / 64) % 64));
  }
  // The first non-empty class at or above `k`; kClasses: none.
  int64_t first_class_from(int64_t k) const {
    const int64_t word = k / 64;
    if (word >= kWords) return kClasses;
    const uint64_t here = small_nonempty[word] & (~uint64_t{0} << (k % 64));
    if (here != 0) return word * 64 + __builtin_ctzll(here);
    for (int64_t w = (word + 1) / 64; w < static_cast<int64_t>(small_words.size()); ++w) {
      uint64_t bits = small_words[w];
      if (w == (word + 1) / 64) bits &= ~uint64_t{0} << ((word + 1) % 64);
      if (bits == 0) continue;
      const int64_t next = w * 64 + __builtin_ctzll(bits);
      return next * 64 + __builtin_ctzll(small_nonempty[next]);
    }
    return kClasses;
  }

  std::vector<Block*> spare;  // Block objects to reuse

  void insert(Block* b) {
    if (!b->small) {
      large.insert(b);
      return;
    }
    const int64_t k = b->size / kMinBlockSize;
    Block* before = nullptr;
    Block* after = small[k];
    while (after != nullptr && after->address < b->address) {
      before = after;
      after = after->free_next;
    }
    b->free_prev = before;
    b->free_next = after;
    (before != nullptr ? before->free_next : small[k]) = b;
    if (after != nullptr) after->free_prev = b;
    mark(k);
  }
  void erase(Block* b) {
    if (!b->small) {
      large.erase(b);
      return;
    }
    const int64_t k = b->size / kMinBlockSize;
    (b->free_prev != nullptr ? b->free_prev->free_next : small[k]) = b->free_next;
    if (b->free_next != nullptr) b->free_next->free_prev = b->free_prev;
    b->free_prev = b->free_next = nullptr;
    if (small[k] == nullptr) unmark(k);
  }
  // The smallest free block of at least `size` (lowest address among equals), out of its pool;
  // nullptr: none fits.
  Block* take_best_fit(int64_t size, bool small_pool) {
    if (!small_pool) {
      Block key;
      key.size = size;
      key.address = -1;
      auto it = large.lower_bound(&key);
      if (it == large.end()) return nullptr;
      Block* b = *it;
      large.erase(it);
      return b;
    }
    const int64_t k = first_class_from(size / kMinBlockSize);
    if (k >= kClasses) return nullptr;
    Block* b = small[k];
    erase(b);
    return b;
  }
  Block* make() {
    if (spare.empty()) return new Block;
    Block* b = spare.back();
    spare.pop_back();
    *b = Block{};
    return b;
  }
  void recycle(Block* b) { spare.push_back(b); }
};

CachingAllocatorModel::CachingAllocatorModel() : pools_(std::make_unique<Pools>()) {}

CachingAllocatorModel::~CachingAllocatorModel() {
  // Free blocks are in the pools; allocated ones belong to their holders (who free them first,
  // or the process ends): delete what the pools hold.
  for (Block* b : pools_->large) delete b;
  for (Block* first : pools_->small) {
    for (Block* b = first; b != nullptr;) delete std::exchange(b, b->free_next);
  }
  for (Block* b : pools_->spare) delete b;
}

int64_t CachingAllocatorModel::size_of(const Block* block) { return block->size; }

int64_t CachingAllocatorModel::rounded(int64_t nbytes) {
  return nbytes < kMinBlockSize ? kMinBlockSize
                                : (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

int64_t CachingAllocatorModel::segment_size(int64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocatorModel::Block* CachingAllocatorModel::allocate(int64_t nbytes) {
  const int64_t size = rounded(nbytes);
  const bool small = size <= kSmallSize;
  Block* block = pools_->take_best_fit(size, small);
  if (block == nullptr) {
    block = pools_->make();
    block->address = next_address_;
    block->size = segment_size(size);
    block->small = small;
    next_address_ += block->size;
    reserved_ += block->size;
    ++segments_;
  }
  const int64_t remaining = block->size - size;
  if (small ? remaining >= kMinBlockSize : remaining > kSmallSize) {
    Block* rest = pools_->make();
    rest->address = block->address + size;
    rest->size = remaining;
    rest->small = small;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next) rest->next->prev = rest;
    block->next = rest;
    block->size = size;
    pools_->insert(rest);
  }
  block->allocated = true;
  return block;
}

void CachingAllocatorModel::free(Block* block) {
  block->allocated = false;
  for (Block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || neighbour->allocated) continue;
    pools_->erase(neighbour);
    if (neighbour == block->prev) {
      block->address = neighbour->address;
      block->prev = neighbour->prev;
      if (block->prev) block->prev->next = block;
    } else {
      block->next = neighbour->next;
      if (block->next) block->next->prev = block;
    }
    block->size += neighbour->size;
    pools_->recycle(neighbour);
  }
  pools_->insert(block);
}

void CachingAllocatorModel::release_cached() {
  std::vector<Block*> whole;  // free blocks that are a whole segment
  for (Block* b : pools_->large) {
    if (b->prev == nullptr && b->next == nullptr) whole.push_back(b);
  }
  for (Block* first : pools_->small) {
    for (Block* b = first; b != nullptr; b = b->free_next) {
      if (b->prev == nullptr && b->next == nullptr) whole.push_back(b);
    }
  }
  for (Block* b : whole) {
    pools_->erase(b);
    reserved_ -= b->size;
    --segments_;
    pools_->recycle(b);
  }
}

}  // namespace harness::memory
