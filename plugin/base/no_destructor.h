// NoDestructor<T>: constructs T in place on first use and never destroys it, so plugin globals
// have no static constructors or exit-time destructors (our pinned abseil has no NoDestructor).
#pragma once

#include <new>
#include <utility>

namespace sentinel::plugin {

template <typename T>
class NoDestructor {
 public:
  template <typename... Args>
  explicit NoDestructor(Args&&... args) {
    new (storage_) T(std::forward<Args>(args)...);
  }
  NoDestructor(const NoDestructor&) = delete;
  NoDestructor& operator=(const NoDestructor&) = delete;
  ~NoDestructor() = default;  // deliberately does not run ~T()

  T* get() { return std::launder(reinterpret_cast<T*>(storage_)); }
  T* operator->() { return get(); }
  T& operator*() { return *get(); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace sentinel::plugin
