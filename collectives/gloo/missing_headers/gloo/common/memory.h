#pragma once
// Stands in for Gloo's gloo/common/memory.h, which Debian's libgloo-dev
// (0.0~git20220518.5b14351) does not install although gloo/transport/tcp/pair.h includes it.
// ddprun compiles tcp::Pair's declaration only to name one of its member functions
// (collectives/gloo/gloo_abort.cpp): it never constructs, copies or destroys a Pair, and never
// touches the members these types declare. They keep Gloo's shape all the same, so that Pair's
// layout is the library's: a weak reference to a buffer (WeakNonOwningPtr), a strong one taken
// from it for the length of a call (NonOwningPtr), and the owner's side that hands out the weak
// ones (ShareableNonOwningPtr), each one standard smart pointer.

#include <memory>

namespace gloo {

template <typename T>
class ShareableNonOwningPtr {
 public:
  std::weak_ptr<T> weak() const { return self_; }

 private:
  std::shared_ptr<T> self_;
};

template <typename T>
class WeakNonOwningPtr {
 public:
  WeakNonOwningPtr() = default;
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T>& owner) : ptr_(owner.weak()) {}
  std::shared_ptr<T> lock() const { return ptr_.lock(); }

 private:
  std::weak_ptr<T> ptr_;
};

template <typename T>
class NonOwningPtr {
 public:
  NonOwningPtr() = default;
  explicit NonOwningPtr(const WeakNonOwningPtr<T>& weak) : ptr_(weak.lock()) {}
  explicit operator bool() const { return ptr_ != nullptr; }
  T* operator->() const { return ptr_.get(); }

 private:
  std::shared_ptr<T> ptr_;
};

}  // namespace gloo
