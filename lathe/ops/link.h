// Keeps the registration of Tensor's op members in every program that uses Lathe above core.
// Core declares Tensor's view, copy and autograd members; lathe_ops implements them and registers
// the table at run time (core/tensor_methods.h). A static archive's object is linked only when
// something references it, so this header references it: every translation unit that includes it
// calls link_tensor_methods() (ops/tensor_methods.cpp, idempotent) at static initialization.
// ops.h includes it (so does every program that includes lathe/lathe.h), and the build
// force-includes it into every file of every layer above core that may use ops (CMakeLists.txt),
// so any object of those layers a link pulls in pulls the registration too: no linker flag.
#pragma once

namespace lathe::detail {
bool link_tensor_methods();
inline const bool tensor_methods_linked = link_tensor_methods();
}  // namespace lathe::detail
