"""Splitting a dynamo FX graph into Lathe partitions and PyTorch nodes, in linear time.

torch.fx's CapabilityBasedPartitioner merges partitions pairwise and searches for cycles on every
merge: superlinear in the graph size and the number of unsupported nodes (swin's first call never
returned). Here one pass over the nodes in topological order assigns each supported node a
partition, and one more builds the fused graph.

The rule that keeps the partitioned graph acyclic: partitions are numbered in the order they are
created, and every node carries `level`, the largest partition number among the node itself and all
its ancestors. A supported node joins a partition P only when every input outside P has a level
below P's number: such an input cannot depend on anything in P (P's nodes all have level >= P's
number), so no path leaves P and comes back through the new node. It tries the newest partition of
all first (siblings reading the same PyTorch node, q/k/v projections after a dropout, end up
together, as torch's partitioner made them), then the newest among its inputs' partitions, and
otherwise starts a new partition. The test is conservative (an input may depend on a newer
partition that does not depend on P), which costs only fragmentation, never correctness.

As CapabilityBasedPartitioner does, the getitems of a node returning a tuple go where that node
goes (a PyTorch node's getitems stay in PyTorch).
"""
import copy
import heapq
import operator

import torch

try:  # generates its Python code on first use only: the Lathe path never runs it
    from torch.fx._lazy_graph_module import _LazyGraphModule as _SubgraphModule
except ImportError:  # an older torch
    _SubgraphModule = torch.fx.GraphModule

__all__ = ["propose_partitions", "fuse_partitions"]


def _is_getitem(node):
    return node.op == "call_function" and node.target is operator.getitem


def _tuple_producer(node):
    """The producer of a getitem whose users are all getitems (a tuple result), else None."""
    if not _is_getitem(node) or not isinstance(node.args[0], torch.fx.Node):
        return None
    src = node.args[0]
    return src if all(_is_getitem(u) for u in src.users) else None


def propose_partitions(gm, is_supported):
    """Partitions of the supported nodes of gm: a list of node lists, each in graph order.
    is_supported(node) -> bool is called once per call_function / call_method node."""
    partition_of = {}  # node -> partition number
    level = {}  # node -> largest partition number among the node and its ancestors
    free = set()  # graph inputs, and PyTorch nodes computed from graph inputs only
    partitions = []
    for node in gm.graph.nodes:
        inputs = node.all_input_nodes
        lvl = max((level[a] for a in inputs), default=-1)
        pid = None
        producer = _tuple_producer(node)
        if producer is not None:
            pid = partition_of.get(producer)  # follows the tuple's producer, PyTorch or Lathe
        elif node.op in ("call_function", "call_method") and is_supported(node):
            # The newest partition of all, else the newest among the inputs' partitions.
            newest_input = max((partition_of[a] for a in inputs if a in partition_of),
                               default=None)
            for candidate in (len(partitions) - 1, newest_input):
                if candidate is not None and candidate >= 0 and all(
                        partition_of.get(a) == candidate or level[a] < candidate
                        for a in inputs):
                    pid = candidate
                    break
            if pid is None:
                pid = len(partitions)
                partitions.append([])
        if pid is not None:
            partition_of[node] = pid
            partitions[pid].append(node)
            lvl = max(lvl, pid)
        elif node.op in ("placeholder", "get_attr") or (
                node.op != "output" and all(a in free for a in inputs)):
            free.add(node)
        level[node] = lvl
    _merge_source_partitions(gm, partitions, partition_of, free)
    return [p for p in partitions if p]


def _merge_source_partitions(gm, partitions, partition_of, free):
    """Merges a partition that reads nothing but graph inputs (and `free` nodes, PyTorch nodes that
    read only graph inputs: bert's attention_mask[:, None, None, :]) into the one partition that
    reads it, which the first pass cannot do: it puts a node into one of its inputs' partitions,
    never two (b * 2 on a SymInt input, a mask computed from an input, an embedding sum). Safe:
    no path from any partition leads into such a partition, and everything leaving it goes
    straight into its reader. A reader that absorbed all it read from becomes one in turn
    (`foreign` counts each partition's inputs from other partitions and PyTorch nodes)."""
    foreign = [0] * len(partitions)
    for q, part in enumerate(partitions):
        for n in part:
            foreign[q] += sum(1 for a in n.all_input_nodes
                              if partition_of.get(a) != q and a not in free)
    work = [q for q in range(len(partitions)) if partitions[q] and foreign[q] == 0]
    merged_into = set()
    while work:
        q = work.pop()
        part = partitions[q]
        if not part or foreign[q] != 0:
            continue
        readers = {partition_of.get(u) for n in part for u in n.users} - {q}
        if len(readers) != 1 or None in readers:
            continue
        (p,) = readers
        foreign[p] -= sum(1 for n in part for u in n.users if partition_of.get(u) == p)
        for n in part:
            partition_of[n] = p
        partitions[p].extend(part)
        partitions[q] = []
        merged_into.add(p)
        if foreign[p] == 0:
            work.append(p)
    if merged_into:  # back into graph order
        position = {n: i for i, n in enumerate(gm.graph.nodes)}
        for p in merged_into:
            if partitions[p]:
                partitions[p].sort(key=position.__getitem__)


def fuse_partitions(gm, partitions, prefix="fused_"):
    """Replaces each partition by a call_module of a GraphModule holding its nodes (submodules
    named prefix + index, as torch.fx's fuse_by_partitions names them). The partitions must be
    acyclic (propose_partitions' are). Linear in the graph size (n log n for the ordering)."""
    nodes = list(gm.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    # Units: a partition, or one node that stays as it is.
    unit_of = {}
    members = []
    for p in partitions:
        for n in p:
            unit_of[n] = len(members)
        members.append(list(p))
    for n in nodes:
        if n not in unit_of:
            unit_of[n] = len(members)
            members.append([n])
    n_partitions = len(partitions)

    # A stable topological order of the units (Kahn's algorithm, ready units by graph position).
    succs = [set() for _ in members]
    indegree = [0] * len(members)
    for n in nodes:
        u = unit_of[n]
        for a in n.all_input_nodes:
            v = unit_of[a]
            if v != u and u not in succs[v]:
                succs[v].add(u)
                indegree[u] += 1
    ready = [(index[m[0]], u) for u, m in enumerate(members) if indegree[u] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(u)
        for s in succs[u]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, (index[members[s][0]], s))
    if len(order) != len(members):
        raise RuntimeError("[lathe.torch] the partitions form a dependency cycle")

    graph = torch.fx.Graph()
    env = {}
    submodules = []
    output_node = None
    for u in order:
        if u >= n_partitions:
            (n,) = members[u]
            if n.op == "output":
                output_node = n
                continue
            env[n] = graph.node_copy(n, lambda x: env[x])
            continue
        part = members[u]
        inside = set(part)
        outputs = [n for n in part if any(user not in inside for user in n.users)]
        if not outputs:  # nothing reads it: the nodes stay as they are
            for n in part:
                env[n] = graph.node_copy(n, lambda x: env[x])
            continue
        sub_graph = torch.fx.Graph()
        sub_env = {}
        ext_inputs = []

        def remap(x, sub_env=sub_env, ext_inputs=ext_inputs, sub_graph=sub_graph):
            if x not in sub_env:  # a node outside the partition: a placeholder
                ph = sub_graph.placeholder(x.name, type_expr=x.type)
                ph.meta = copy.copy(x.meta)
                sub_env[x] = ph
                ext_inputs.append(x)
            return sub_env[x]

        for n in part:
            sub_env[n] = sub_graph.node_copy(n, remap)
        outs = tuple(sub_env[n] for n in outputs)
        sub_graph.output(outs[0] if len(outs) == 1 else outs)
        name = f"{prefix}{u}"
        # Partitions hold call_function / call_method nodes only: nothing to copy from gm.
        submodules.append((name, _SubgraphModule(torch.nn.Module(), sub_graph, class_name=name)))
        call = graph.call_module(name, tuple(env[x] for x in ext_inputs))
        if len(outputs) == 1:
            call.meta = copy.copy(outputs[0].meta)
            env[outputs[0]] = call
        else:
            for k, o in enumerate(outputs):
                g = graph.call_function(operator.getitem, (call, k))
                g.meta = copy.copy(o.meta)
                env[o] = g
    if output_node is not None:
        graph.node_copy(output_node, lambda x: env[x])
    gm.graph = graph  # recompiles gm; submodules added after it are not recompiled with it
    for name, sub in submodules:
        gm.add_submodule(name, sub)
    return gm
