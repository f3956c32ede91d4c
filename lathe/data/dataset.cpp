#include "lathe/data/dataset.h"

namespace lathe::data {

size_t FieldSpec::nbytes() const {
  size_t n = itemsize(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

}  // namespace lathe::data
