"""Graph breaks in lathe.compile: a Python function that reads tensor data runs as regions split
at each read, equal to eager over many calls; lathe.explain reports the regions; fullgraph=True
keeps the error."""
import pytest
import torch

import lathe


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return lathe.from_dlpack(torch.randn(*shape, generator=g))


def branchy(x):
    h = x * 3.0
    if lathe.sum(h).item() > 0:
        return lathe.relu(h) + 1.0
    return lathe.tanh(h) * -1.0


def test_branch_on_item_matches_eager_for_both_branches():
    f = lathe.compile(branchy)
    for call in range(10):
        x = t(4, 5, seed=call)
        if (call % 2 == 0) != (lathe.sum(x).item() > 0):
            x = x * -1.0
        torch.testing.assert_close(torch.from_dlpack(f(x)), torch.from_dlpack(branchy(x)))
        r = f.explain_last_call()
        assert r["graph_count"] == 2 and r["graph_break_count"] == 1, r["text"]
    s = f.stats()
    assert s["region_compiles"] == 3 and s["region_calls"] == 10 and s["compiles"] == 0


def test_trip_count_from_a_value_and_a_print_in_the_middle(capsys):
    def fn(x):
        n = int(abs(lathe.sum(x).item())) % 4
        y = x
        for _ in range(n):
            y = y * 0.5 + 1.0
        print(y)  # a print of a value in the middle
        return y

    f = lathe.compile(fn)
    for call in range(8):
        x = t(3, 3, seed=40 + call) * 2.0
        got = torch.from_dlpack(f(x)).clone()
        compiled_out = capsys.readouterr().out
        want = torch.from_dlpack(fn(x))
        assert compiled_out == capsys.readouterr().out
        torch.testing.assert_close(got, want)


def test_explain_names_each_break_and_its_source_op():
    r = lathe.explain(branchy, t(4, 5))
    assert r.graph_count == 2 and r.graph_break_count == 1
    assert r.ops_per_graph[0] == 2  # mul, sum
    assert "item() of f32[] computed by sum" in r.break_reasons[0]
    assert "Graph Count: 2" in str(r)
    one = lathe.explain(lambda x: lathe.relu(x), t(3))
    assert one.graph_count == 1 and one.graph_break_count == 0


def test_fullgraph_keeps_the_error():
    f = lathe.compile(branchy, fullgraph=True)
    with pytest.raises(lathe.Error, match=r"\[trace\] item\(\) reads the data of f32\[\]"):
        f(t(4, 5))


def test_gradients_flow_across_the_break():
    w = lathe.from_dlpack(torch.randn(5, 3)).requires_grad_(True)

    def fn(x):
        h = x @ w
        s = 1.0 if lathe.sum(h).item() > 0 else -3.0
        return lathe.sum(lathe.tanh(h) * s)

    f = lathe.compile(fn)
    for call in range(4):
        x = t(4, 5, seed=70 + call)
        got = f(x)
        got.backward()
        g_compiled = torch.from_dlpack(w.grad).clone()
        w.grad = None
        want = fn(x)
        want.backward()
        torch.testing.assert_close(torch.from_dlpack(got), torch.from_dlpack(want))
        torch.testing.assert_close(g_compiled, torch.from_dlpack(w.grad))
        w.grad = None
