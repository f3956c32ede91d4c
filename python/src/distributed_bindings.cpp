// lathe.distributed: the process group (lathe/distributed) from Python, named as
// torch.distributed names it: init_process_group, all_reduce, broadcast, all_gather, barrier,
// and DistributedDataParallel for lathe.nn modules.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "lathe/base/error.h"
#include "lathe/distributed/ddp.h"

namespace lathe::python {
namespace {

using namespace lathe::distributed;

ReduceOp reduce_op(const std::string& op) {
  if (op == "sum") return ReduceOp::sum;
  if (op == "avg" || op == "average") return ReduceOp::average;
  throw Error("[lathe.distributed] op must be 'sum' or 'avg', got '" + op + "'");
}

// Waits (releasing the GIL) unless async_op: then the caller gets the work handle.
nb::object finish(std::shared_ptr<Work> w, bool async_op) {
  if (async_op) return nb::cast(w);
  nb::gil_scoped_release release;
  w->wait();
  return nb::none();
}

}  // namespace

void bind_distributed(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("distributed", "Data-parallel training on Gloo");
  nb::class_<Work>(m, "Work")
      .def(
          "wait",
          [](Work& w) {
            nb::gil_scoped_release release;
            w.wait();
          },
          "Blocks until the collective is done; raises its error")
      .def("is_completed", &Work::is_completed)
      .def("__repr__", [](const Work& w) { return "<lathe.distributed.Work " + w.what() + ">"; });
  nb::class_<ProcessGroup>(m, "ProcessGroup")
      .def("rank", &ProcessGroup::rank)
      .def("size", &ProcessGroup::size);

  m.def(
      "init_process_group",
      [](std::optional<int> rank, std::optional<int> world_size, std::optional<std::string> addr,
         std::optional<int> port, std::optional<std::string> init_dir,
         std::optional<double> timeout_s) {
        ProcessGroupOptions o = ProcessGroupOptions::from_env();
        if (rank) o.rank = *rank;
        if (world_size) o.world_size = *world_size;
        if (addr) o.master_addr = *addr;
        if (port) o.master_port = *port;
        if (init_dir) o.init_dir = *init_dir;
        if (timeout_s)
          o.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1e3));
        nb::gil_scoped_release release;  // the rendezvous waits for the other ranks
        return init_process_group(o);
      },
      nb::arg("rank") = nb::none(), nb::arg("world_size") = nb::none(),
      nb::arg("master_addr") = nb::none(), nb::arg("master_port") = nb::none(),
      nb::arg("init_dir") = nb::none(), nb::arg("timeout") = nb::none(),
      "Joins the default group; unset arguments come from RANK, WORLD_SIZE, MASTER_ADDR, "
      "MASTER_PORT, LATHE_DIST_INIT_DIR, LATHE_DIST_TIMEOUT");
  m.def("is_initialized", &is_initialized);
  m.def("destroy_process_group", &destroy_process_group);
  m.def("get_rank", [] { return default_process_group()->rank(); });
  m.def("get_world_size", [] { return default_process_group()->size(); });
  m.def(
      "all_reduce",
      [](const Tensor& t, const std::string& op, bool async_op) {
        return finish(default_process_group()->all_reduce({t}, reduce_op(op)), async_op);
      },
      nb::arg("tensor"), nb::arg("op") = "sum", nb::arg("async_op") = false,
      "In place: the sum ('sum') or average ('avg') of the tensor over the ranks");
  m.def(
      "broadcast",
      [](const Tensor& t, int src, bool async_op) {
        return finish(default_process_group()->broadcast({t}, src), async_op);
      },
      nb::arg("tensor"), nb::arg("src") = 0, nb::arg("async_op") = false);
  m.def(
      "all_gather",
      [](const Tensor& t) {
        Tensor out;
        auto w = default_process_group()->all_gather(t, &out);
        nb::gil_scoped_release release;
        w->wait();
        return out;
      },
      nb::arg("tensor"), "Every rank's tensor, stacked: [world_size, *tensor.shape]");
  m.def("barrier", [] {
    auto w = default_process_group()->barrier();
    nb::gil_scoped_release release;
    w->wait();
  });

  nb::class_<DistributedDataParallel>(m, "DistributedDataParallel")
      .def(
          "__init__",
          [](DistributedDataParallel* self, std::shared_ptr<nn::Module> module, double bucket_mb,
             bool broadcast_buffers, bool find_unused_parameters) {
            DistributedDataParallelOptions o;
            o.bucket_bytes = static_cast<size_t>(bucket_mb * (1 << 20));
            o.broadcast_buffers = broadcast_buffers;
            o.find_unused_parameters = find_unused_parameters;
            new (self) DistributedDataParallel(std::move(module), default_process_group(), o);
          },
          nb::arg("module"), nb::arg("bucket_cap_mb") = 25.0, nb::arg("broadcast_buffers") = true,
          nb::arg("find_unused_parameters") = false)
      .def("__call__", &DistributedDataParallel::forward)
      .def("sync_buffers", &DistributedDataParallel::sync_buffers)
      .def("bucket_names", &DistributedDataParallel::bucket_names)
      .def(
          "set_sync", [](DistributedDataParallel& d, bool on) { d.set_sync(on); },
          "False: backwards accumulate locally (lathe.distributed.no_sync wraps it)");
}

}  // namespace lathe::python
