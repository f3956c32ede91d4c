"""lathe.compile on Python functions over lathe tensors: traced once by the C++ tracer, guarded."""
import sys
import threading
import time

import pytest
import torch

import lathe


def t(*shape):
    return lathe.from_dlpack(torch.randn(*shape))


def test_decorator_traces_once_and_matches_eager():
    calls = []

    @lathe.compile
    def f(x, y):
        calls.append(1)  # runs only while tracing
        return lathe.relu(x @ y) + 1.0

    x, y = t(3, 4), t(4, 5)
    want = torch.relu(torch.from_dlpack(x) @ torch.from_dlpack(y)) + 1.0
    for _ in range(3):
        torch.testing.assert_close(torch.from_dlpack(f(x, y)), want)
    assert len(calls) == 1
    s = f.stats()
    assert s["calls"] == 3 and s["compiles"] == 1 and s["hits"] == 2
    assert "matmul" in f.graph_string()


def test_scalar_arguments_are_guarded_by_value():
    @lathe.compile(dynamic=False)
    def scale(x, k):
        return x * k

    x = t(4)
    torch.testing.assert_close(torch.from_dlpack(scale(x, 2.0)), torch.from_dlpack(x) * 2)
    torch.testing.assert_close(torch.from_dlpack(scale(x, 3.0)), torch.from_dlpack(x) * 3)
    assert scale.stats()["compiles"] == 2
    assert "3" in scale.last_recompile_reason()


def test_new_shape_recompiles_and_tuple_results():
    @lathe.compile
    def f(x):
        return lathe.softmax(x, -1), x.sum([0])

    for n in (2, 3, 4):
        a, b = f(t(n, 5))
        assert a.shape == [n, 5] and b.shape == [5]
    assert f.stats()["compiles"] <= 3


def test_compiled_module_guards_its_parameters():
    lin = lathe.nn.Linear(4, 2)
    f = lathe.compile(lin)
    x = t(3, 4)
    torch.testing.assert_close(torch.from_dlpack(f(x)), torch.from_dlpack(lin(x)))
    # A new parameter tensor in place of the traced one is seen by the guards.
    lin.load_state_dict({"weight": lathe.zeros([2, 4]), "bias": lathe.ones([2])})
    torch.testing.assert_close(torch.from_dlpack(f(x)), torch.ones(3, 2))


def test_python_errors_and_lathe_errors_reach_the_caller():
    @lathe.compile
    def bad(x):
        raise ValueError("boom from python")

    with pytest.raises(ValueError, match="boom from python"):
        bad(t(2))

    @lathe.compile
    def shapes(x, y):
        return x @ y

    with pytest.raises(lathe.Error, match="matmul"):
        shapes(t(2, 3), t(4, 5))


def test_metrics_and_logs(caplog):
    @lathe.compile(name="logged_fn", dynamic=False)
    def f(x):
        return x + 1.0

    lathe._logs.set_logs("recompiles")
    try:
        with caplog.at_level("WARNING", logger="lathe"):
            f(t(2))
            f(t(3))
    finally:
        lathe._logs.set_logs("")
    assert any("logged_fn" in r.getMessage() for r in caplog.records)
    m = lathe.metrics()
    assert any(k.startswith("logged_fn") and v["compiles"] == 2 for k, v in m["compiled"].items())
    assert "cache_hits" in m["lazy"]


def test_gil_is_released_while_compiled_graph_runs():
    @lathe.compile
    def heavy(x):
        for _ in range(20):
            x = lathe.tanh(x @ x) * 0.5
        return x

    x = t(256, 256)
    heavy(x)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0)  # hands the GIL back at once

    # With a huge switch interval the interpreter never takes the GIL from the main thread: the
    # ticker can run during heavy() only if the binding released it.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        th = threading.Thread(target=ticker)
        th.start()
        before = len(ticks)
        # The ticker needs the scheduler to run it while a call is in flight: on a loaded
        # machine one short call may not see that happen, so give it several calls.
        for _ in range(200):
            heavy(x)
            if len(ticks) > before:
                break
        during = len(ticks) - before
        stop.set()
        th.join()
    finally:
        sys.setswitchinterval(old)
    assert during > 0


def test_sym_size_keeps_computed_sizes_symbolic():
    seen = []

    @lathe.compile(dynamic=True)
    def regroup(x):
        b, n = x.sym_size(0), x.sym_size(1)
        seen.append(type(b))
        return lathe.relu(x.reshape([b * 2, n // 2]))

    for batch in (3, 5, 7, 5):
        x = t(batch, 8)
        want = torch.relu(torch.from_dlpack(x).reshape(batch * 2, 4))
        torch.testing.assert_close(torch.from_dlpack(regroup(x)), want)
    assert seen == [lathe.SymInt]  # traced once, the batch a symbol
    assert regroup.stats()["compiles"] == 1


def test_mark_static_keeps_a_dim_static_under_dynamic_true():
    @lathe.compile(dynamic=True)
    def f(x):
        return x.reshape([x.sym_size(0), -1]) * 2.0

    shapes = []
    for rows, cols in ((3, 4), (5, 4), (5, 6)):
        x = t(rows, cols)
        lathe.mark_static(x, [1])
        shapes.append(x.shape)
        torch.testing.assert_close(torch.from_dlpack(f(x)), torch.from_dlpack(x) * 2)
    # rows symbolic (one entry for 3 and 5), cols static: 6 needs a second entry.
    assert f.stats()["compiles"] == 2
    assert "6" in f.guards_string(0) or "6" in f.last_recompile_reason()


def test_sym_int_arithmetic_and_errors():
    @lathe.compile(dynamic=True)
    def f(x):
        b = x.sym_size(0)
        assert isinstance(b + 1, lathe.SymInt) and isinstance(1 + b, lathe.SymInt)
        assert isinstance(-b, lathe.SymInt) and isinstance(b - b, int)
        with pytest.raises(lathe.Error, match=r"\[shape\] a size is a str"):
            x.reshape([b, "4"])
        return x.reshape([b * 4])

    x = t(3, 4)
    torch.testing.assert_close(torch.from_dlpack(f(x)), torch.from_dlpack(x).reshape(12))
