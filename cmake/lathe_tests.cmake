# Lathe's tests (LATHE_BUILD_TESTS; included by CMakeLists.txt, so paths are the top level's):
# the GoogleTest folders, the layer and source checks, lathe-bench and the examples as CTests.

# One GoogleTest executable per test folder: tests/<layer>/*.cpp -> test_<layer>.
enable_testing()
include(GoogleTest)
# Every test runs with the measurement cache off (each process measures afresh, so no test's
# outcome depends on which ran before), and pointed inside the build tree should a test turn it
# on without its own directory: a test never reads or writes the user's ~/.cache. The cache's own
# tests (tests/kernels, tests/backend) turn it on in temporary directories.
# Tests run two at a time on two cores, a busy machine: an executable choosing its thread count
# from its call times (LATHE_CPU_ADAPTIVE_THREADS) would make a compiled result's last bits
# depend on the timing. Its tests turn it on themselves (tests/backend/test_adaptive_threads.cpp).
set(LATHE_TEST_ENVIRONMENT "LATHE_CACHE=0" "LATHE_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/test-cache"
    "LATHE_CPU_ADAPTIVE_THREADS=0")
# A folder's tests are registered one CTest per gtest case (gtest_discover_tests), or, with
# SHARDS n, as n CTests that each run every n-th case of the binary (gtest's GTEST_TOTAL_SHARDS /
# GTEST_SHARD_INDEX), named <folder>.shard<i>of<n>: for suites of many fast cases whose cost is
# the process start (the oracle suite's 2,185 cases run in under a second in one process, and took
# minutes as one process each). A shard prints only its failures (GTEST_BRIEF=1), each with its
# gtest message, under `ctest --output-on-failure`; run one case with the binary's --gtest_filter.
# <folder>.list (a fixture the shards require) lists the cases first: it builds what the binary
# builds at registration (the oracle data) once, before shards run in parallel.
function(lathe_test_shards target name shards labels)
  add_test(NAME ${name}.list COMMAND ${target} --gtest_list_tests)
  set_tests_properties(${name}.list PROPERTIES LABELS "${labels}" FIXTURES_SETUP ${name}_cases
                       ENVIRONMENT "${LATHE_TEST_ENVIRONMENT}")
  math(EXPR last "${shards} - 1")
  foreach(i RANGE ${last})
    set(test ${name}.shard${i}of${shards})
    add_test(NAME ${test} COMMAND ${target})
    set_tests_properties(${test} PROPERTIES LABELS "${labels}" FIXTURES_REQUIRED ${name}_cases
      ENVIRONMENT "${LATHE_TEST_ENVIRONMENT};GTEST_TOTAL_SHARDS=${shards};GTEST_SHARD_INDEX=${i};GTEST_BRIEF=1")
  endforeach()
endfunction()
function(lathe_test_folder name)
  cmake_parse_arguments(T "" "SHARDS" "LIBS;LABELS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/${name}/*.cpp)
  if(srcs)
    add_executable(test_${name} ${srcs})
    target_compile_options(test_${name} PRIVATE ${LATHE_WARNINGS})
    target_link_libraries(test_${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
    target_compile_definitions(test_${name} PRIVATE
      LATHE_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}" LATHE_BINARY_DIR="${CMAKE_CURRENT_BINARY_DIR}")
    if(T_SHARDS)
      lathe_test_shards(test_${name} ${name} ${T_SHARDS} "${name};${T_LABELS}")
    else()
      gtest_discover_tests(test_${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${name};${T_LABELS}"
                           ENVIRONMENT "${LATHE_TEST_ENVIRONMENT}")
    endif()
  endif()
endfunction()

# Each links the layer it tests and what its tests build on (e.g. core's tests make views: ops).
lathe_test_folder(sym LIBS lathe_sym)
lathe_test_folder(core LIBS lathe_ops)
lathe_test_folder(kernels LIBS lathe_kernels)
lathe_test_folder(ops LIBS lathe_ir)
lathe_test_folder(nn LIBS lathe_nn)
lathe_test_folder(io LIBS lathe_io)
# Two shards: ctest -j2 runs them side by side.
lathe_test_folder(oracle LIBS lathe_lazy lathe_trace SHARDS 2)
lathe_test_folder(models LIBS lathe_models lathe_io)
lathe_test_folder(ir LIBS lathe_trace)
lathe_test_folder(trace LIBS lathe_trace lathe_lazy lathe_models)
lathe_test_folder(backend LIBS lathe_trace lathe_models)
lathe_test_folder(lazy LIBS lathe_lazy lathe_trace lathe_models lathe_optim)
# Autograd lives in lathe/ops; its tests also trace vjps and train zoo models.
lathe_test_folder(autograd LIBS lathe_trace lathe_models lathe_io lathe_optim)
lathe_test_folder(optim LIBS lathe_optim lathe_io)
# Data-parallel training: the tests start lathe_dist_worker (one rank) and lathe-run as processes.
lathe_test_folder(distributed LIBS lathe_distributed LABELS distributed)
if(TARGET test_distributed)  # (the layer tests configure copies without tests/)
  add_executable(lathe_dist_worker ${CMAKE_CURRENT_SOURCE_DIR}/tests/distributed/worker/dist_worker.cpp)
  target_compile_options(lathe_dist_worker PRIVATE ${LATHE_WARNINGS})
  target_link_libraries(lathe_dist_worker PRIVATE lathe)
  add_dependencies(test_distributed lathe_dist_worker lathe-run)
endif()
lathe_test_folder(data LIBS lathe_data LABELS data)

# The layer checks fail the build on an upward include: shown on a copy of the sources.
add_test(NAME layers.upward_include_fails_build
         COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/upward_include_test
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/test_upward_include.cmake)
set_tests_properties(layers.upward_include_fails_build PROPERTIES LABELS "layers" TIMEOUT 600)
# The symbol check on the real archives: kernels checked against sym alone misses core's symbols.
add_test(NAME layers.symbol_check_names_missing_layer
         COMMAND Python3::Interpreter ${LATHE_CHECK_LAYERS} symbols --layer kernels
                 --archive $<TARGET_FILE:lathe_kernels> --deps=$<TARGET_FILE:lathe_sym>
                 --stamp ${CMAKE_CURRENT_BINARY_DIR}/layer_checks/negative_test.symbols)
set_tests_properties(layers.symbol_check_names_missing_layer PROPERTIES LABELS "layers"
  PASS_REGULAR_EXPRESSION "error: layer 'kernels' uses lathe::Tensor::numel\\(\\) const, which no layer below it defines")

# The member check: core's archive checked as if it were a layer above core defines Tensor's
# members in the wrong layer.
add_test(NAME layers.member_check_names_declaring_layer
         COMMAND Python3::Interpreter ${LATHE_CHECK_LAYERS} symbols --layer kernels
                 --archive $<TARGET_FILE:lathe_core> --deps=$<TARGET_FILE:lathe_sym>
                 --root ${CMAKE_CURRENT_SOURCE_DIR} --allowed=core
                 --stamp ${CMAKE_CURRENT_BINARY_DIR}/layer_checks/negative_member_test.symbols)
set_tests_properties(layers.member_check_names_declaring_layer PROPERTIES LABELS "layers"
  PASS_REGULAR_EXPRESSION "error: layer 'kernels' defines lathe::Tensor::view\\(.*\\) const, a member of Tensor, which lathe/core/ declares")

# Source checks on lathe/ (cmake/check_sources.py), each listing file:line of what it finds: the
# LATHE_* environment is read only in each component's one options file (issue 26), and no
# library file is over 600 lines nor function over 100.
set(LATHE_CHECK_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cmake/check_sources.py)
add_test(NAME lint.options_env
         COMMAND Python3::Interpreter ${LATHE_CHECK_SOURCES} options-env
                 --root ${CMAKE_CURRENT_SOURCE_DIR}
                 --allow lathe/core/core_options.cpp --allow lathe/kernels/kernel_options.cpp
                 --allow lathe/backend/cpu/cpu_options.cpp --allow lathe/trace/compile_options.cpp
                 --allow lathe/distributed/dist_options.cpp)
add_test(NAME lint.sizes
         COMMAND Python3::Interpreter ${LATHE_CHECK_SOURCES} sizes --root ${CMAKE_CURRENT_SOURCE_DIR}
                 --max-file-lines 600 --max-function-lines 100)
set_tests_properties(lint.options_env lint.sizes PROPERTIES LABELS "lint")

# The interpreter the PyTorch oracle tests run (tests/oracle/oracle_python.h): this checkout's
# venv unless configured otherwise; the environment variable LATHE_PYTHON overrides it at test time.
set(LATHE_PYTHON "${CMAKE_CURRENT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python with torch for the oracle tests")
foreach(t test_oracle test_models test_io test_autograd test_optim)
  if(TARGET ${t})
    target_compile_definitions(${t} PRIVATE LATHE_PYTHON_DEFAULT="${LATHE_PYTHON}")
  endif()
endforeach()

# lathe-bench as a test: every model with every backend passes the fp64 accuracy check (model
# and inputs on the lazy device), and the command-line contract holds.
add_test(NAME lathe_bench.accuracy_all_models
         COMMAND lathe-bench --accuracy --trace-on-lazy --batch-size 1)
set_tests_properties(lathe_bench.accuracy_all_models PROPERTIES LABELS "tools" TIMEOUT 1500)
add_test(NAME lathe_bench.performance_table
         COMMAND lathe-bench --only squeezenet1_1 --repeat 2 --warmup 0 --trace-on-lazy)
set_tests_properties(lathe_bench.performance_table PROPERTIES LABELS "tools"
  PASS_REGULAR_EXPRESSION "\\| squeezenet1_1 \\| [0-9.]+ \\| [0-9.]+x \\| [0-9.]+x \\| [0-9.]+ \\|.*\\| geomean \\|")
# bf16 compiles (CompileOptions::precision) pass the bf16 accuracy rule against fp64 on a conv
# net, a depthwise one and bert (all ten: docs/benchmarks.md), and the rule catches a 10% error.
foreach(model resnet18 mobilenet_v2 bert)
  add_test(NAME lathe_bench.accuracy_bf16.${model}
           COMMAND lathe-bench --accuracy --only ${model} --backend eager,compile:bf16)
  set_tests_properties(lathe_bench.accuracy_bf16.${model} PROPERTIES LABELS "tools" TIMEOUT 900
    PASS_REGULAR_EXPRESSION "\\| ${model} \\| pass \\| pass \\(bf16 rmse\\) \\|"
    FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
add_test(NAME lathe_bench.accuracy_bf16_detects_errors
         COMMAND lathe-bench --accuracy --only resnet18 --backend eager,compile:bf16
                 --inject-error compile:bf16)
set_tests_properties(lathe_bench.accuracy_bf16_detects_errors PROPERTIES LABELS "tools"
  PASS_REGULAR_EXPRESSION "\\| resnet18 \\| pass \\| FAIL \\|.*1 failure")
# --training at a tiny size: the table has the eager step time, lazy's and compile's speedups
# (the lazy device records forward, backward and the update; compile is AOT autograd); one SGD
# step's gradients and parameters match fp64 eager for eager, lazy and compile, and the check can
# fail.
add_test(NAME lathe_bench.training_table
         COMMAND lathe-bench --training --only resnet18 --batch-size 2 --image-size 64
                 --repeat 2 --warmup 0)
set_tests_properties(lathe_bench.training_table PROPERTIES LABELS "tools"
  PASS_REGULAR_EXPRESSION "\\| resnet18 \\| [0-9.]+ \\| [0-9.]+x \\| [0-9.]+x \\| [0-9.]+ \\|.*\\| geomean \\|")
# Lazy and compiled training equal eager training: for each of the ten models, one SGD step's
# gradients and updated parameters, eager, lazy and compile, pass the check against fp64 eager (the smallest
# sizes that keep every layer: 64x64 images, where resnet's last stage is 2x2, vit with 16
# patches, bert at sequence 16). One test per model, so that they run in parallel and a failure
# names its model; the lathe-bench exit status is 1 on any failure.
foreach(model resnet18 resnet50 resnext50_32x4d alexnet vgg16 mobilenet_v2 mnasnet1_0
              squeezenet1_1 bert vit)
  add_test(NAME lathe_bench.training_accuracy.${model}
           COMMAND lathe-bench --accuracy --training --only ${model} --batch-size 2
                   --image-size 64 --seq-len 16)
  set_tests_properties(lathe_bench.training_accuracy.${model} PROPERTIES LABELS "tools;training"
    TIMEOUT 1500
    PASS_REGULAR_EXPRESSION "\\| ${model} \\| pass \\| pass \\| pass \\|"
    FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
# --training --ddp 2: two localhost ranks (through lathe-run) time the data-parallel step and
# their first step's gradients equal one process's on the whole batch (squeezenet1_1 has no
# BatchNorm, whose per-rank statistics would differ) to rounding, eager and compiled.
add_test(NAME lathe_bench.training_ddp
         COMMAND lathe-bench --training --ddp 2 --only squeezenet1_1 --batch-size 4
                 --image-size 64 --repeat 2 --warmup 0 --backend eager,compile)
set_tests_properties(lathe_bench.training_ddp PROPERTIES LABELS "tools;distributed" TIMEOUT 600
  PASS_REGULAR_EXPRESSION "\\| squeezenet1_1 \\| eager \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+x \\| ([0-9.]+e-(0[6-9]|[1-9][0-9])|0) \\|.*\\| squeezenet1_1 \\| compile \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+x \\| ([0-9.]+e-(0[6-9]|[1-9][0-9])|0) \\|")
add_test(NAME lathe_bench.training_accuracy_detects_errors
         COMMAND lathe-bench --accuracy --training --only resnet18 --batch-size 2 --image-size 64
                 --backend eager --inject-error eager)
set_tests_properties(lathe_bench.training_accuracy_detects_errors PROPERTIES LABELS "tools"
  PASS_REGULAR_EXPRESSION "\\| resnet18 \\| FAIL \\|.*1 failure")
# The f32 noise bound of the check does not hide a 1% error in a model where most tensors pass by
# it only (mobilenet_v2: BatchNorm gradients that f32 cannot resolve, see tools/lathe-bench/).
add_test(NAME lathe_bench.training_accuracy_detects_errors_within_noise
         COMMAND lathe-bench --accuracy --training --only mobilenet_v2 --batch-size 2
                 --image-size 64 --inject-error compile)
set_tests_properties(lathe_bench.training_accuracy_detects_errors_within_noise PROPERTIES
  LABELS "tools;training" TIMEOUT 900
  PASS_REGULAR_EXPRESSION "\\| mobilenet_v2 \\| pass \\| pass \\| FAIL \\|.*1 failure")
# Data-parallel training: two ranks started by lathe-run train the digits CNN with the compiled
# step, rank 0 reports each epoch (tests/distributed/ checks the equivalence with one process).
add_test(NAME examples.train_ddp_two_ranks
         COMMAND lathe-run --nproc-per-node 2 --master-port 29517 ${CMAKE_CURRENT_BINARY_DIR}/train_ddp 2)
set_tests_properties(examples.train_ddp_two_ranks PROPERTIES LABELS "examples;distributed"
  TIMEOUT 300 ENVIRONMENT "${LATHE_TEST_ENVIRONMENT}"
  PASS_REGULAR_EXPRESSION "epoch 2/2  loss [0-9.]+ .*test accuracy 0\\.[3-9]")
# The example trains with the compiled step: two epochs learn (one trace serves every step).
add_test(NAME examples.train_mnist_like COMMAND train_mnist_like 2)
set_tests_properties(examples.train_mnist_like PROPERTIES LABELS "examples;training" TIMEOUT 600
  PASS_REGULAR_EXPRESSION "epoch 2/2  loss [0-9.]+  train accuracy 0\\.[6-9][0-9]*  test accuracy 0\\.[5-9][0-9]*  lr [0-9.]+  [0-9.]+ s \\(1 compile\\)")
# The same example on idx files through lathe/data's DataLoader: the generated digits written as
# gzipped idx files first (a stand-in for MNIST), then two epochs on them learn.
add_test(NAME examples.train_mnist_like_write_idx
         COMMAND train_mnist_like --write-idx ${CMAKE_CURRENT_BINARY_DIR}/mnist_like_idx)
set_tests_properties(examples.train_mnist_like_write_idx PROPERTIES LABELS "examples;data"
  FIXTURES_SETUP mnist_like_idx)
add_test(NAME examples.train_mnist_like_idx_files
         COMMAND train_mnist_like 2 ${CMAKE_CURRENT_BINARY_DIR}/mnist_like_idx)
set_tests_properties(examples.train_mnist_like_idx_files PROPERTIES LABELS "examples;data;training"
  TIMEOUT 600 FIXTURES_REQUIRED mnist_like_idx
  PASS_REGULAR_EXPRESSION "epoch 2/2  loss [0-9.]+  train accuracy 0\\.[6-9][0-9]*  test accuracy 0\\.[5-9][0-9]*  lr [0-9.]+  [0-9.]+ s \\(1 compile\\)")
# A resnet18 on an image folder with the compiled step: 40 generated JPEGs (lathe-data-bench
# --generate, which also times one pass), one epoch at 64x64 through the DataLoader.
add_test(NAME examples.train_image_folder_jpegs
         COMMAND lathe-data-bench --generate 40 --folder ${CMAKE_CURRENT_BINARY_DIR}/image_folder_jpegs
                 --workers 1 --epochs 1)
set_tests_properties(examples.train_image_folder_jpegs PROPERTIES LABELS "examples;data"
  FIXTURES_SETUP image_folder_jpegs PASS_REGULAR_EXPRESSION "workers 1  40 images")
add_test(NAME examples.train_image_folder
         COMMAND train_image_folder ${CMAKE_CURRENT_BINARY_DIR}/image_folder_jpegs --size 64
                 --batch 8 --epochs 1)
set_tests_properties(examples.train_image_folder PROPERTIES LABELS "examples;data;training"
  TIMEOUT 600 FIXTURES_REQUIRED image_folder_jpegs
  PASS_REGULAR_EXPRESSION "batch 5/5  40 samples.*epoch 1/1  loss [0-9.]+  [0-9.]+ images/s  [0-9.]+ s \\(1 compile\\)")
add_test(NAME lathe_bench.unknown_backend COMMAND lathe-bench --backend eager,xla)
set_tests_properties(lathe_bench.unknown_backend PROPERTIES LABELS "tools"
  PASS_REGULAR_EXPRESSION "unknown backend 'xla'")
# trace_once: the earlier name of the compile mode, still accepted.
add_test(NAME lathe_bench.accuracy_detects_errors
         COMMAND lathe-bench --accuracy --only squeezenet1_1 --inject-error trace_once)
set_tests_properties(lathe_bench.accuracy_detects_errors PROPERTIES LABELS "tools"
  PASS_REGULAR_EXPRESSION "\\| squeezenet1_1 \\| pass \\| pass \\| FAIL \\|.*1 failure")

# The tests added with add_test above (lathe-bench, the examples, the layer checks) get the test
# environment too; the GoogleTest ones have it from lathe_test_folder.
get_property(lathe_plain_tests DIRECTORY PROPERTY TESTS)
if(lathe_plain_tests)
  set_property(TEST ${lathe_plain_tests} APPEND PROPERTY ENVIRONMENT ${LATHE_TEST_ENVIRONMENT})
endif()
