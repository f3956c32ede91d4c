#include "lathe/core/storage.h"

#include <cstdlib>
#include <new>

#include "lathe/core/error.h"

namespace lathe {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  std::shared_ptr<Storage> s(new Storage());
  size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  s->data_ = std::aligned_alloc(64, rounded);
  if (!s->data_) throw Error(detail::str("[storage] out of memory allocating ", nbytes, " bytes"));
  s->nbytes_ = nbytes;
  void* p = s->data_;
  s->release_ = [p] { std::free(p); };
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, std::function<void()> release) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->release_ = std::move(release);
  return s;
}

Storage::~Storage() {
  if (release_) release_();
}

}  // namespace lathe
