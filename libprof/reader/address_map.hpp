// Values by address for the replay of a trace's allocations (the memory report's live blocks,
// profpack's bookkeeping): open addressing with linear probing and backward-shift deletion (no
// tombstones), one allocation per growth instead of one node per entry, a few times faster
// than std::unordered_map on the tens of millions of insertions and erasures of a large trace.
// Address 0 marks an empty slot: a null pointer is never recorded as allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace prof::reader {

template <class Value>
class AddressMap {
public:
    Value* find(uint64_t address) {
        if (slots_.empty()) return nullptr;
        for (size_t i = index(address);; i = (i + 1) & mask_) {
            if (slots_[i].address == address) return &slots_[i].value;
            if (!slots_[i].address) return nullptr;
        }
    }
    void set(uint64_t address, const Value& v) {
        if ((count_ + 1) * 4 > slots_.size() * 3) grow();
        size_t i = index(address);
        while (slots_[i].address && slots_[i].address != address) i = (i + 1) & mask_;
        if (!slots_[i].address) ++count_;
        slots_[i] = Slot{address, v};
    }
    // `v`: a pointer find() returned.
    void erase(const Value* v) {
        size_t hole = size_t(reinterpret_cast<const Slot*>(reinterpret_cast<const char*>(v) -
                                                           offsetof(Slot, value)) -
                             slots_.data());
        // Move back every later entry of the run that may sit at or before the hole.
        for (size_t i = (hole + 1) & mask_; slots_[i].address; i = (i + 1) & mask_) {
            size_t home = index(slots_[i].address);
            if (((i - home) & mask_) >= ((i - hole) & mask_)) {
                slots_[hole] = slots_[i];
                hole = i;
            }
        }
        slots_[hole].address = 0;
        --count_;
    }
    template <typename F> void for_each(F&& f) const {
        for (const Slot& s : slots_)
            if (s.address) f(s.address, s.value);
    }
    void clear() {
        slots_.clear();
        slots_.shrink_to_fit();
        mask_ = count_ = 0;
        shift_ = 64;
    }

private:
    struct Slot {
        uint64_t address = 0;
        Value value{};
    };
    // Fibonacci hashing: the product's top bits.
    size_t index(uint64_t address) const {
        return size_t((address * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    void grow() {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
        mask_ = slots_.size() - 1;
        shift_ = 64 - unsigned(__builtin_ctzll(slots_.size()));
        count_ = 0;
        for (const Slot& s : old)
            if (s.address) set(s.address, s.value);
    }
    std::vector<Slot> slots_;
    size_t mask_ = 0, count_ = 0;
    unsigned shift_ = 64;
};

} // namespace prof::reader
