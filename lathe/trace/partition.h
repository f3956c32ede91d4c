// Partitioners: how the joint graph of a training entry (joint_graph.h) splits into the forward
// graph, which returns its outputs followed by the saved values, and the backward graph, which
// takes (forward inputs it reads, saved values, output gradients) and returns the gradients of
// the forward inputs that require grad. Chosen by CompileOptions::partitioner.
#pragma once

#include <memory>
#include <string>

#include "lathe/trace/joint_graph.h"

namespace lathe {

class Partitioner {
 public:
  virtual ~Partitioner() = default;
  // How CompileOptions::to_string and logs name it.
  virtual std::string name() const = 0;
  // Chooses, for each forward value the backward reads (joint.needed), whether the forward
  // saves it or the backward recomputes it (graph inputs are read in place), and returns
  // joint.split(saved, recomputed). Throws lathe::Error (JointGraph::fail) for what cannot be
  // compiled.
  virtual detail::Partition partition(detail::JointGraph& joint) const = 0;
};

// Today's rule (a simple form of AOTAutograd's min-cut partition): a value the backward needs is
// recomputed there, not saved, when a pointwise or view op (no writes, not random) makes it from
// values the backward has anyway (forward inputs or other needed values). Saving its inputs
// instead costs nothing more, and the recomputation is one cheap pass. Everything else is saved.
class DefaultPartitioner : public Partitioner {
 public:
  std::string name() const override { return "default"; }
  detail::Partition partition(detail::JointGraph& joint) const override;
};

// The partitioner `options` chooses: options.partitioner, or a shared DefaultPartitioner.
const Partitioner& partitioner_of(const CompileOptions& options);

}  // namespace lathe
