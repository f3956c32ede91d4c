"""torch.compile(model, backend="lathe") on the ten benchmark models (plain PyTorch modules from
tests/oracle/ref_models.py), partitioning of unsupported ops, and dynamic batch sizes.

CI runs small inputs (64x64 images, a 2-layer bert/vit); LATHE_PY_LONG=1 runs the full sizes."""
import logging

import pytest
import torch

import lathe
import lathe.torch  # noqa: F401  (registers backend="lathe" in a build-tree checkout)
import ref_models
from conftest import LONG

SMALL_CFG = {
    "bert": dict(hidden=64, layers=2, heads=4, intermediate=128, vocab_size=500, max_position=64),
    "vit": dict(variant="vit_small_patch16_224", dim=64, depth=2, heads=4, img_size=64),
}


def assert_close_harness(out, ref, tol=1e-3):
    """lathe-bench's accuracy rule: allclose with rtol = tol and atol = tol * min(1, max|ref|)."""
    scale = ref.abs().max().item()
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol * min(1.0, scale))


def build(name):
    cfg = {} if LONG else SMALL_CFG.get(name, {})
    model = ref_models.build(name, **cfg).eval()
    kwargs = dict(cfg)
    if not LONG:
        kwargs.update(image_size=64 if name != "vit" else None, seq_len=16)
    inputs = ref_models.default_input(name, 1, 0, **kwargs)
    return model, inputs


@pytest.mark.parametrize("name", ref_models.MODEL_NAMES)
def test_model_matches_eager(name):
    model, inputs = build(name)
    with torch.no_grad():
        want = model(*inputs)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="lathe")
        got = compiled(*inputs)
        got_again = compiled(*inputs)  # served by the compiled graph
    for out in (got, got_again):
        if isinstance(want, tuple):
            for o, w in zip(out, want):
                assert_close_harness(o, w)
        else:
            assert_close_harness(out, want)


class Recorder:
    """A backend that wraps lathe's and keeps the graphs it produced."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        fn = lathe.torch.backend(gm, example_inputs)
        self.graphs.append(fn.__self__ if hasattr(fn, "__self__") else gm)
        return fn

    def subgraphs(self):
        return [m for g in self.graphs for m in g.modules()
                if isinstance(m, lathe.torch.LatheSubgraph)]


class WithUnsupportedOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = torch.cumsum(y, dim=3)  # no Lathe lowering: stays in PyTorch
        return self.fc(torch.flatten(y, 1))


def test_unsupported_op_is_partitioned_and_logged(caplog):
    model = WithUnsupportedOp().eval()
    x = torch.randn(2, 3, 8, 8)
    rec = Recorder()
    torch._dynamo.reset()
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="lathe.torch"):
        got = torch.compile(model, backend=rec)(x)
        want = model(x)
    assert_close_harness(got, want)
    assert any("cumsum" in r.getMessage() and "stays in PyTorch" in r.getMessage()
               for r in caplog.records)
    subs = rec.subgraphs()
    assert len(subs) == 2  # conv+relu before the cumsum, flatten+linear after it
    assert all(s.compiled.stats()["compiles"] == 1 for s in subs)


def test_eval_inplace_dropout_stays_in_the_lathe_subgraph(caplog):
    # Dropout(inplace=True) in eval mode is the identity (mnasnet's classifier): no split there.
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),
                                torch.nn.Dropout(0.2, inplace=True), torch.nn.Linear(8, 4)).eval()
    x = torch.randn(3, 8)
    rec = Recorder()
    torch._dynamo.reset()
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="lathe.torch"):
        got = torch.compile(model, backend=rec)(x)
        want = model(x)
    assert_close_harness(got, want)
    assert len(rec.subgraphs()) == 1
    assert not any("dropout" in r.getMessage() for r in caplog.records)


class SlicedBuffer(torch.nn.Module):
    """bert's embeddings: a buffer sliced to the input's length (position_ids[:, :seq])."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(32, 8)
        self.register_buffer("position_ids", torch.arange(32).expand((1, -1)), persistent=False)

    def forward(self, x):
        return x + self.table(self.position_ids[:, :x.shape[1]])


def test_slice_of_a_buffer_runs_in_lathe_and_is_frozen():
    # The partitioner would leave a getitem whose input has only getitem users out of every
    # partition; the slice then reached Lathe as a per-call input instead of a frozen constant.
    model = SlicedBuffer().eval()
    x = torch.randn(2, 12, 8)
    rec = Recorder()
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend=rec)(x)
        want = model(x)
    assert_close_harness(got, want)
    (sub,) = rec.subgraphs()
    assert len(sub.dynamic_positions) == 1  # x only
    assert sub.compiled.guards_string(0).count("is the tensor frozen") == 2


class RegroupByBatch(torch.nn.Module):
    """Sizes computed from the batch (dynamo passes them as SymInt inputs)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        b = x.size(0)
        y = torch.relu(self.fc(x)).view(b, 4, 4).transpose(1, 2).reshape(b, -1)
        return self.fc2(y).view(b * 2, 2)


def test_dynamic_batch_compiles_once_with_symbols():
    model = RegroupByBatch().eval()
    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=rec)
    batches = [2, 3, 4, 5, 6, 3, 4, 9]
    with torch.no_grad():
        for b in batches:
            x = torch.randn(b, 8)
            assert_close_harness(compiled(x), model(x))
    # dynamo: one static graph (batch 2), then one graph with a symbolic batch for the rest.
    assert len(rec.graphs) == 2
    static_graph, dynamic_graph = rec.graphs
    (dynamic_sub,) = [m for m in dynamic_graph.modules()
                      if isinstance(m, lathe.torch.LatheSubgraph)]
    # Lathe: the dynamic graph's subgraph is traced once, its batch a Lathe symbol; the SymInt
    # inputs (b, b * 2) are computed from the input's symbolic size, not passed as ints.
    stats = dynamic_sub.compiled.stats()
    assert stats["compiles"] == 1 and stats["calls"] == len(batches) - 1
    assert dynamic_sub.shapes.any_symbolic and dynamic_sub.shapes.derived
    assert "s0" in dynamic_sub.compiled.graph_string()
    lathe_compiles = sum(s.compiled.stats()["compiles"] for s in rec.subgraphs())
    assert lathe_compiles == 2


def test_dynamic_batch_bert_compiles_once():
    cfg = SMALL_CFG["bert"]
    model = ref_models.build("bert", **cfg).eval()
    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=rec)
    with torch.no_grad():
        for b in (2, 3, 5, 4):
            inputs = ref_models.default_input("bert", b, b, seq_len=16, **cfg)
            got, want = compiled(*inputs), model(*inputs)
            for o, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
                assert_close_harness(o, w)
    subs_dynamic = [m for m in rec.graphs[-1].modules() if isinstance(m, lathe.torch.LatheSubgraph)]
    assert subs_dynamic and all(s.compiled.stats()["compiles"] == 1 for s in subs_dynamic)


def test_parameters_are_lifted_once_and_updates_are_seen():
    model = torch.nn.Linear(6, 3).eval()
    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=rec)
    x = torch.randn(4, 6)
    with torch.no_grad():
        compiled(x)
        (sub,) = rec.subgraphs()
        lifted = dict(sub.lifted)
        assert sub.compiled.stats()["compiles"] == 1
        # In place: no re-lift (same zero-copy view); the entry that froze the old weight is
        # dropped (torch's version counter, bumped on the Lathe side) and the next call re-freezes.
        model.weight.mul_(2.0)
        assert_close_harness(compiled(x), model(x))
        assert all(sub.lifted[k] is v for k, v in lifted.items())
        assert sub.compiled.stats()["compiles"] == 2
        assert sub.compiled.num_entries() == 1
        assert_close_harness(compiled(x), model(x))
        assert sub.compiled.stats()["compiles"] == 2


class ConvBnBlock(torch.nn.Module):
    """A resnet basic block: conv-bn-relu, conv-bn, residual add, relu."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad_on_frozen_params"])
def test_eval_inference_freezes_parameters_and_folds_batch_norm(grad, monkeypatch, capfd):
    # An inference call (torch.no_grad, or no parameter requiring grad) gets what lathe::compile
    # gives an eval module: the lifted parameters frozen into constants, the batch norms folded
    # into the convolutions. Lathe's own grad mode (on by default, and not torch's) must not
    # keep the lifted parameters as per-call inputs.
    torch.manual_seed(0)
    model = ConvBnBlock().eval()
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):  # not the identity statistics of a fresh BatchNorm
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    if grad:
        model.requires_grad_(False)
    x = torch.randn(2, 8, 16, 16)
    rec = Recorder()
    torch._dynamo.reset()
    monkeypatch.setenv("LATHE_LOGS", "passes")  # read by the cpu backend when it compiles
    with torch.set_grad_enabled(grad):
        compiled = torch.compile(model, backend=rec)
        got = compiled(x)
        assert_close_harness(got, model(x))
        log = capfd.readouterr().err
        assert "(2 batch norms folded into their convolution)" in log, log
        (sub,) = rec.subgraphs()
        # Both conv weights and the four tensors of each batch norm.
        assert sub.compiled.guards_string(0).count("is the tensor frozen") == 10
        # A frozen statistic updated in place by torch is seen: the next call re-freezes.
        with torch.no_grad():
            model.bn2.running_mean.add_(0.25)
        assert_close_harness(compiled(x), model(x))
        assert sub.compiled.stats()["compiles"] == 2


def test_grad_mode_with_trainable_inputs_trains_through_lathe():
    # More in test_torch_training.py.
    model = torch.nn.Linear(3, 2)
    rec = Recorder()
    torch._dynamo.reset()
    x = torch.randn(2, 3)
    out = torch.compile(model, backend=rec)(x)
    out.sum().backward()
    (sub,) = rec.subgraphs()
    assert sub.compiled_train.stats()["compiles"] == 1 and not sub.train_fallback
    assert_close_harness(model.weight.grad, torch.ones(2, 1) * x.sum(0), tol=1e-5)
    assert_close_harness(model.bias.grad, torch.full((2,), 2.0), tol=1e-5)


class IntegerMatmul(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b) + 1


def test_subgraph_lathe_rejects_runs_in_pytorch_with_lathes_reason(caplog):
    a = torch.randint(0, 5, (3, 4))
    b = torch.randint(0, 5, (4, 2))
    torch._dynamo.reset()
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="lathe.torch"):
        got = torch.compile(IntegerMatmul(), backend="lathe")(a, b)
    assert torch.equal(got, a @ b + 1)
    # Lathe's own message (component first) is in the log line.
    assert any("[matmul]" in r.getMessage() and "i64" in r.getMessage() for r in caplog.records)


class InplaceReluReadAgain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x):
        y = self.fc(x)
        z = torch.nn.functional.relu(y, inplace=True)  # writes y, which is read again below
        return z + y


def test_inplace_write_read_again_keeps_pytorch_semantics():
    model = InplaceReluReadAgain().eval()
    x = torch.randn(3, 6)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="lathe")(x)
        want = model(x)
    assert_close_harness(got, want)
    assert torch.equal(want, 2 * torch.relu(model.fc(x)))
