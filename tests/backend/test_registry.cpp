// The backend registry: built-in interpreter, registration, unknown names, thread safety.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "lathe/backend/backend.h"

namespace lathe::backend {
namespace {

class NullBackend : public Backend {
 public:
  explicit NullBackend(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::unique_ptr<Executable> compile(const ir::Graph&) override { return nullptr; }

 private:
  std::string name_;
};

TEST(BackendRegistry, InterpreterIsBuiltIn) {
  auto names = backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "interpreter"), names.end());
  EXPECT_EQ(create_backend("interpreter")->name(), "interpreter");
}

TEST(BackendRegistry, RegistersByNameOnceAndListsKnownNamesOnUnknown) {
  register_backend("test.null", [] { return std::make_unique<NullBackend>("test.null"); });
  EXPECT_EQ(create_backend("test.null")->name(), "test.null");
  try {
    register_backend("test.null", [] { return std::make_unique<NullBackend>("again"); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[backend] a backend named 'test.null' is already registered");
  }
  try {
    create_backend("tensorrt");
    FAIL();
  } catch (const Error& e) {
    // Other tests of this binary register their own backends (test_attention's
    // record_cpu_ops), so only the prefix and the names this test relies on are fixed.
    const std::string msg = e.what();
    EXPECT_EQ(
        msg.rfind("[backend] unknown backend 'tensorrt'; known backends: cpu, interpreter, ", 0),
        0u)
        << msg;
    EXPECT_NE(msg.find("test.null"), std::string::npos) << msg;
  }
}

TEST(BackendRegistry, ConcurrentRegisterAndCreate) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 25; ++i) {
        std::string name = "test.c" + std::to_string(t) + "." + std::to_string(i);
        register_backend(name, [name] { return std::make_unique<NullBackend>(name); });
        EXPECT_EQ(create_backend(name)->name(), name);
        EXPECT_EQ(create_backend("interpreter")->name(), "interpreter");
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GE(backend_names().size(), 101u);
}

}  // namespace
}  // namespace lathe::backend
