"""Training through torch.compile(model, backend="lathe"): Lathe's compiled forward and backward
(AOT autograd in C++) tied into torch's autograd, one torch.autograd.Function per Lathe subgraph.

Each test runs the same SGD steps on an eager copy of the model and on the compiled one and
compares the losses, every param.grad, the updated parameters and the buffers (BatchNorm's
running statistics)."""
import copy
import logging

import pytest
import torch
import torch.nn.functional as F

import lathe
import lathe.torch  # noqa: F401  (registers backend="lathe" in a build-tree checkout)
import ref_models

TOL = 1e-4


def assert_close(got, want, what, tol=TOL):
    scale = want.abs().max().item() if want.numel() else 0.0
    # rtol, and atol relative to the largest magnitude (lathe-bench's accuracy rule), at least
    # 1e-6: a conv bias before BatchNorm has a gradient of zero up to rounding noise.
    torch.testing.assert_close(got.to(want.dtype), want, rtol=tol, atol=max(tol * scale, 1e-6),
                               msg=lambda m: f"{what}: {m}")


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


def train_both(model, batches, loss_fn, steps=3, lr=0.05, momentum=0.9, tol=TOL, ref_dtype=None):
    """SGD steps on an eager copy and through backend="lathe"; compares after every step.
    ref_dtype=torch.float64: the eager copy runs in f64 (as lathe-bench --accuracy does), for
    models where PyTorch's own f32 gradients are further from f64 than the tolerance.
    Returns the Recorder of the compiled run."""
    eager = copy.deepcopy(model)
    if ref_dtype is not None:
        eager = eager.to(ref_dtype)
    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=rec)
    opt_e = torch.optim.SGD(eager.parameters(), lr=lr, momentum=momentum)
    opt_c = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for step in range(steps):
        inputs, target = batches[step % len(batches)]
        for m, f, opt in ((eager, eager, opt_e), (model, compiled, opt_c)):
            x, t = inputs, target
            if m is eager and ref_dtype is not None:
                x = [a.to(ref_dtype) if a.is_floating_point() else a for a in inputs]
                t = target.to(ref_dtype) if target.is_floating_point() else target
            opt.zero_grad()
            torch.manual_seed(100 + step)  # dropout (in PyTorch in both runs) draws equal masks
            loss = loss_fn(f(*x), t)
            loss.backward()
            opt.step()
            if m is eager:
                loss_e = loss.detach()
            else:
                loss_c = loss.detach()
        assert_close(loss_c, loss_e, f"step {step} loss", tol)
        params_e = dict(eager.named_parameters())
        for name, p in model.named_parameters():
            pe = params_e[name]
            assert (p.grad is None) == (pe.grad is None), f"step {step} {name}.grad presence"
            if pe.grad is not None:
                assert_close(p.grad, pe.grad, f"step {step} {name}.grad", tol)
            assert_close(p.detach(), pe.detach(), f"step {step} {name} after SGD", tol)
        buffers_e = dict(eager.named_buffers())
        for name, b in model.named_buffers():
            if b.is_floating_point():
                assert_close(b, buffers_e[name], f"step {step} buffer {name}", tol)
            else:
                assert torch.equal(b, buffers_e[name]), f"step {step} buffer {name}"
    return rec


def assert_trained_by_lathe(rec, n_steps):
    """Every Lathe subgraph ran its compiled training entry on every step (no PyTorch fallback),
    compiled once."""
    subs = rec.subgraphs()
    assert subs, "no Lathe subgraph"
    for s in subs:
        assert not s.train_fallback and not s.torch_fallback, s.name
        stats = s.compiled_train.stats()
        assert stats["calls"] == n_steps and stats["compiles"] == 1, (s.name, stats)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(16)
        self.fc = torch.nn.Linear(16, 5)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.max_pool2d(y, 2)
        y = F.relu(self.bn2(self.conv2(y))) + 0.5 * y.mean()  # two uses of y
        y = F.adaptive_avg_pool2d(y, 1).flatten(1)
        return self.fc(y)


def cnn_batches(n=3, batch=4, size=12, classes=5):
    g = torch.Generator().manual_seed(1)
    return [((torch.randn(batch, 3, size, size, generator=g),),
             torch.randint(0, classes, (batch,), generator=g)) for _ in range(n)]


def test_cnn_with_batchnorm_in_train_mode_matches_eager():
    model = SmallCNN().train()
    rec = train_both(model, cnn_batches(), F.cross_entropy, steps=3)
    assert_trained_by_lathe(rec, 3)
    assert model.bn1.num_batches_tracked.item() == 3


def test_cnn_in_eval_mode_fine_tunes_like_eager():
    # BatchNorm in eval mode (running statistics read, not written) with grad enabled.
    model = SmallCNN()
    with torch.no_grad():
        model(torch.randn(8, 3, 12, 12))  # running statistics away from 0 / 1
    rec = train_both(model.eval(), cnn_batches(), F.cross_entropy, steps=3)
    assert_trained_by_lathe(rec, 3)


def test_frozen_parameters_get_no_grad():
    model = SmallCNN().train()
    for p in model.conv1.parameters():
        p.requires_grad_(False)
    rec = train_both(model, cnn_batches(), F.cross_entropy, steps=2)
    assert model.conv1.weight.grad is None and model.fc.weight.grad is not None
    assert_trained_by_lathe(rec, 2)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 32)
        self.fc2 = torch.nn.Linear(32, 32)
        self.fc3 = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(F.gelu(self.fc1(x))))).softmax(-1)


def test_mlp_matches_eager():
    g = torch.Generator().manual_seed(2)
    batches = [((torch.randn(6, 10, generator=g),), torch.randn(6, 3, generator=g))
               for _ in range(2)]
    rec = train_both(MLP(), batches, F.mse_loss, steps=4, lr=0.5)
    assert_trained_by_lathe(rec, 4)


class TransformerBlock(torch.nn.Module):
    """Pre-norm attention + MLP, with dropout (stays in PyTorch in a training graph, so its masks
    are eager's)."""

    def __init__(self, dim=16, heads=2, dropout=0.0):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 4 * dim)
        self.fc2 = torch.nn.Linear(4 * dim, dim)
        self.drop = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(dim, 4)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, d)))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return self.head(x.mean(1))


def block_batches():
    g = torch.Generator().manual_seed(3)
    return [((torch.randn(2, 6, 16, generator=g),), torch.randint(0, 4, (2,), generator=g))
            for _ in range(2)]


def test_transformer_block_matches_eager():
    rec = train_both(TransformerBlock(), block_batches(), F.cross_entropy, steps=3)
    assert_trained_by_lathe(rec, 3)


def test_dropout_stays_in_pytorch_in_training_graphs(caplog):
    with caplog.at_level(logging.WARNING, logger="lathe.torch"):
        # Same seed for both runs: eager's masks and the compiled run's (PyTorch's) agree.
        torch.manual_seed(5)
        model = TransformerBlock(dropout=0.3).train()
        eager = copy.deepcopy(model)
        x, y = block_batches()[0]
        rec = Recorder()
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=rec)
        torch.manual_seed(7)
        F.cross_entropy(eager(*x), y).backward()
        torch.manual_seed(7)
        F.cross_entropy(compiled(*x), y).backward()
    for (name, p), pe in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, pe.grad, name)
    assert any("dropout" in r.getMessage() and "random op in a training graph" in r.getMessage()
               for r in caplog.records)
    assert len(rec.subgraphs()) >= 2  # split at the dropout
    assert_trained_by_lathe(rec, 1)


class WithUnsupportedOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False)  # BatchNorm follows
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.cumsum(y, dim=3)  # no Lathe lowering: stays in PyTorch, between two subgraphs
        return self.fc(torch.flatten(y, 1))


def test_unsupported_op_in_the_middle_trains_through_both_subgraphs():
    g = torch.Generator().manual_seed(4)
    batches = [((torch.randn(3, 3, 8, 8, generator=g),), torch.randint(0, 5, (3,), generator=g))
               for _ in range(2)]
    rec = train_both(WithUnsupportedOp().train(), batches, F.cross_entropy, steps=3)
    assert len(rec.subgraphs()) == 2
    assert_trained_by_lathe(rec, 3)


def test_dynamic_batch_trains_with_one_lathe_compile():
    model = SmallCNN().train()
    eager = copy.deepcopy(model)
    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=rec)
    g = torch.Generator().manual_seed(8)
    for b in (2, 3, 5, 4):
        x = torch.randn(b, 3, 12, 12, generator=g)
        y = torch.randint(0, 5, (b,), generator=g)
        model.zero_grad()
        eager.zero_grad()
        F.cross_entropy(eager(x), y).backward()
        F.cross_entropy(compiled(x), y).backward()
        for (name, p), pe in zip(model.named_parameters(), eager.parameters()):
            assert_close(p.grad, pe.grad, f"batch {b} {name}.grad")
    # dynamo: a static graph for batch 2, then one with a symbolic batch; Lathe traces the
    # latter's training entry once, its batch a Lathe symbol.
    dynamic = [s for s in rec.subgraphs() if s.shapes.any_symbolic]
    assert dynamic
    for s in dynamic:
        assert s.compiled_train.stats()["compiles"] == 1 and s.compiled_train.stats()["calls"] == 3


class CloneInTheMiddle(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 4)
        self.fc2 = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(torch.clone(torch.relu(self.fc1(x))))


def test_subgraph_lathe_cannot_train_is_trained_by_pytorch(monkeypatch, caplog):
    # A lowering whose Lathe code writes in place into a value that requires grad: Lathe's AOT
    # autograd refuses it (eager Lathe would too), so PyTorch trains that subgraph.
    def clone_by_copy(x, memory_format=None):
        y = x * 1.0
        y.copy_(x)
        return y

    monkeypatch.setitem(lathe.torch._lowerings.FUNCTIONS, torch.clone,
                        lathe.torch._lowerings.Lowering(clone_by_copy))
    model = CloneInTheMiddle()
    eager = copy.deepcopy(model)
    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=rec)
    x = torch.randn(3, 4)
    with caplog.at_level(logging.WARNING, logger="lathe.torch"):
        compiled(x).sum().backward()
    eager(x).sum().backward()
    for (name, p), pe in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, pe.grad, name)
    assert any("cannot compile this subgraph for training" in r.getMessage() and
               "copy_" in r.getMessage() for r in caplog.records)
    (sub,) = rec.subgraphs()
    assert sub.train_fallback
    with torch.no_grad():  # dynamo compiles a graph for no_grad: it runs in Lathe
        assert_close(compiled(x), eager(x), "inference after the training fallback")
    assert rec.subgraphs()[-1].compiled.stats()["calls"] == 1
    torch._dynamo.reset()  # the patched lowering leaves with this test


def test_input_gradients_reach_pytorch():
    model = MLP()
    eager = copy.deepcopy(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="lathe")
    x = torch.randn(4, 10)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    (eager(xe) ** 2).sum().backward()
    (compiled(xc) ** 2).sum().backward()
    assert_close(xc.grad, xe.grad, "x.grad")


def test_double_backward_falls_back_to_pytorch_with_a_log(caplog):
    model = MLP()
    eager = copy.deepcopy(model)
    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=rec)
    x = torch.randn(4, 10)
    with caplog.at_level(logging.WARNING, logger="lathe.torch"):
        for m, f in ((eager, eager), (model, compiled)):
            xi = x.clone().requires_grad_()
            out = f(xi).pow(2).sum()
            (gx,) = torch.autograd.grad(out, xi, create_graph=True)  # a gradient penalty
            (out + gx.pow(2).sum()).backward()
    for (name, p), pe in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, pe.grad, name)
    assert any("double backward" in r.getMessage() and "PyTorch reruns" in r.getMessage()
               for r in caplog.records)
    assert rec.subgraphs()[0].compiled_train.stats()["calls"] == 1  # the forward ran in Lathe


def test_retain_graph_second_backward_falls_back_to_pytorch(caplog):
    model = SmallCNN().train()
    eager = copy.deepcopy(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="lathe")
    (x,), y = cnn_batches(1)[0]
    with caplog.at_level(logging.WARNING, logger="lathe.torch"):
        for f in (eager, compiled):
            loss = F.cross_entropy(f(x), y)
            loss.backward(retain_graph=True)
            loss.backward()  # grads doubled
    for (name, p), pe in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, pe.grad, name)
    # The rerun did not update the running statistics a second time.
    assert_close(model.bn1.running_mean, eager.bn1.running_mean, "running_mean")
    assert any("retain_graph" in r.getMessage() for r in caplog.records)


def test_output_modified_in_place_before_backward_is_handled(caplog):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(5, 5)

        def forward(self, x):
            return torch.sigmoid(self.fc(x))  # sigmoid's backward reads its output

    model = Model()
    eager = copy.deepcopy(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="lathe")
    x = torch.randn(3, 5)
    out_c = compiled(x)
    out_e = eager(x)
    # Eager PyTorch refuses: sigmoid saved the output it would read.
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out_e.mul_(2.0)
        out_e.sum().backward()
    out_c.mul_(2.0)
    # Lathe's saved output was overwritten too: the backward is computed by PyTorch instead,
    # from the saved inputs; PyTorch's rerun gives the gradient of sigmoid(fc(x)) * 2.
    with caplog.at_level(logging.WARNING, logger="lathe.torch"):
        out_c.sum().backward()
    assert any("modified in place" in r.getMessage() for r in caplog.records)
    e2 = copy.deepcopy(model)
    e2.zero_grad()
    (torch.sigmoid(e2.fc(x)) * 2.0).sum().backward()
    assert_close(model.fc.weight.grad, e2.fc.weight.grad, "fc.weight.grad")


def test_inference_after_training_uses_updated_parameters():
    model = SmallCNN().train()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="lathe")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    (x,), y = cnn_batches(1)[0]
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(compiled(x), y).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        assert_close(compiled(x), model(x), "eval output after training", 1e-3)


@pytest.mark.parametrize("name", ["resnet18", "vit"])
def test_zoo_model_trains_like_eager(name):
    classes = 10
    cfg = {"vit": dict(variant="vit_small_patch16_224", dim=32, depth=1, heads=2, img_size=32,
                       patch=8, classes=classes)}.get(name, {"num_classes": classes})
    model = ref_models.build(name, **cfg).train()
    # resnet18 at 64x64 and batch 4 (layer4 at 2x2, its BatchNorms over 16 values): at 32x32
    # they normalize over 2 values, where f32 results (PyTorch's too) scatter by 1e-3 around f64;
    # at batch 2, over 8 values, one ReLU input near zero whose sign f32 rounding flips moves a
    # BatchNorm bias gradient by 10% (step 1 on oneDNN's AVX2 kernels; not on SSE4.1 or AVX-512).
    size, batch = (64, 4) if name == "resnet18" else (32, 2)
    g = torch.Generator().manual_seed(6)
    batches = [((torch.randn(batch, 3, size, size, generator=g),),
                torch.randint(0, classes, (batch,), generator=g)) for _ in range(2)]
    # PyTorch's f32 gradients of resnet18 at batch 2 differ from f64 by up to 20% for some
    # seeds (BatchNorm's backward over a few elements), so f64 is the reference; at batch 4 and
    # this seed Lathe's stay within 2e-5 of it (oneDNN AVX2 and SSE4.1 kernels, 1 and 2 threads).
    rec = train_both(model, batches, F.cross_entropy, steps=2, lr=0.01, tol=2e-4,
                     ref_dtype=torch.float64)
    assert_trained_by_lathe(rec, 2)


def test_bert_with_dropout_and_an_unused_output_matches_eager():
    cfg = dict(hidden=32, layers=2, heads=2, intermediate=64, vocab_size=100, max_position=32)
    model = ref_models.build("bert", **cfg).train()
    g = torch.Generator().manual_seed(9)
    batches = [(ref_models.default_input("bert", 2, s, seq_len=8, **cfg),
                torch.randn(2, 8, 32, generator=g)) for s in range(2)]

    def loss_fn(out, target):  # the pooled output is not used: the pooler's grads stay None
        return F.mse_loss(out[0], target)

    rec = train_both(model, batches, loss_fn, steps=2, lr=0.1)
    assert model.pooler.dense.weight.grad is None
    assert_trained_by_lathe(rec, 2)


def test_lathe_tensor_autograd_from_python():
    x = lathe.tensor([[1.0, -2.0], [3.0, 0.5]]).requires_grad_()
    assert x.requires_grad and x.is_leaf and x.grad is None
    y = lathe.relu(x) * x
    assert not y.is_leaf and y.grad_fn_name
    y.backward(lathe.tensor([[1.0, 1.0], [1.0, 2.0]]))
    expected = torch.tensor([[2.0, 0.0], [6.0, 2.0]])  # d(relu(x) x)/dx = 2x for x > 0, else 0
    assert torch.equal(torch.from_dlpack(x.grad), expected)
    x.grad = None
    assert x.grad is None
    with lathe.no_grad():
        assert not lathe.is_grad_enabled()
        assert not (x * 2.0).requires_grad
    assert lathe.is_grad_enabled()
    a = lathe.tensor([2.0]).requires_grad_()
    lathe.backward([a * 3.0, a * a], [None, lathe.tensor([0.5])])
    assert a.grad.item() == pytest.approx(3.0 + 0.5 * 4.0)
