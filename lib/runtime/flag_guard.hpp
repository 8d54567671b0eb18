// SPDX-License-Identifier: Apache-2.0
// A block flag held for a scope in which the lock may be released: kFlagAdmitting while an
// admission places a block, kFlagHeld while move() makes room for one. Other threads wait on
// moved_cv for a block so flagged (or skip it as a victim), so every exit from the scope, an
// exception included, clears the flag and wakes them. The entry is looked up again by id on the
// way out, as after every release of the lock.
#pragma once

#include "lib/runtime/runtime_impl.hpp"

#include <utility>

namespace cxltier {

// What an exit by exception undoes besides the flag: nothing.
struct NoUndo {
  void operator()(StoreEntry &) const noexcept {}
};

// An admission that failed before its block was placed leaves the block's state as it found it:
// the policy state from before the admission, the readmission count, not resident, and no entry
// at all for a key never seen before.
struct UndoAdmission {
  Runtime::Impl &m;
  NodeId id;
  PolicyState before;
  bool restored;
  void operator()(StoreEntry &f) const noexcept {
    if (f.res.tier >= 0) return;
    f.st = before;
    if (restored) --m.restored;
    m.store->set_resident(id, false);
    if (before.tick == 0 && f.res.pins == 0 && f.res.flags == 0) m.store->erase(id);
  }
};

template <class Undo = NoUndo>
class FlagGuard {
public:
  // [mu held] Sets `flag` on block `id`. When the scope ends without done() (an exception),
  // the flag is cleared, then `undo` runs on the entry, then waiters are woken.
  FlagGuard(Runtime::Impl &m, NodeId id, uint8_t flag, Undo undo = {}) noexcept
      : m_(m), id_(id), flag_(flag), undo_(std::move(undo)) {
    (*m_.store)[id_].res.flags |= flag_;
  }
  FlagGuard(const FlagGuard &) = delete;
  FlagGuard &operator=(const FlagGuard &) = delete;
  ~FlagGuard() {
    if (!armed_) return;
    undo_(clear());
    m_.moved_cv.notify_all();
  }
  // [mu held] The scope succeeded: clear the flag and wake the waiters now; nothing is undone.
  void done() noexcept {
    clear();
    armed_ = false;
    m_.moved_cv.notify_all();
  }

private:
  StoreEntry &clear() noexcept {
    StoreEntry &e = (*m_.store)[id_];
    e.res.flags = static_cast<uint8_t>(e.res.flags & ~flag_);
    return e;
  }

  Runtime::Impl &m_;
  NodeId id_;
  uint8_t flag_;
  bool armed_ = true;
  Undo undo_;
};

}  // namespace cxltier
