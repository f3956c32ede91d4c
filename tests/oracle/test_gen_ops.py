"""Checks of the op oracle's generator (pytest): the stored data reproduces itself.

Each case's stored base inputs, with its view chain re-applied, must give torch's stored
outputs again (so in-place ops did not leak into the stored inputs and the view descriptions
say what torch saw), and the data must be deterministic.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import gen_ops  # noqa: E402


@pytest.fixture(scope="module")
def oracle():
    torch.set_num_threads(1)
    return gen_ops.build()


def test_names_unique_and_tensors_present(oracle):
    names = [c["name"] for c in oracle.cases]
    assert len(names) == len(set(names))
    for c in oracle.cases:
        for i, inp in enumerate(c["inputs"]):
            assert (inp is None) == (f"{c['name']}.in.{i}" not in oracle.tensors)
        for j in range(len(c["outputs"])):
            assert f"{c['name']}.out.{j}" in oracle.tensors


def test_replay_from_stored_inputs(oracle):
    for c in oracle.cases:
        if c.get("stats_only"):
            continue
        name = c["name"]
        fn, inplace = oracle.fns[name]
        xs, base0 = [], None
        for i, inp in enumerate(c["inputs"]):
            if inp is None:
                xs.append(None)
                continue
            base = oracle.tensors[f"{name}.in.{i}"].clone()
            if i == 0:
                base0 = base
            xs.append(gen_ops.apply_views(base, inp["views"]))
        outs = fn(*xs)
        outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
        if inplace:
            outs.append(base0)
        assert len(outs) == len(c["outputs"]), name
        for j, o in enumerate(outs):
            want = oracle.tensors[f"{name}.out.{j}"]
            assert o.dtype == want.dtype and o.shape == want.shape, name
            assert torch.equal(o, want) or (o.is_floating_point() and torch.allclose(
                o, want, rtol=0, atol=0, equal_nan=True)), name


def test_deterministic(oracle):
    torch.set_num_threads(1)
    again = gen_ops.build()
    assert [c["name"] for c in again.cases] == [c["name"] for c in oracle.cases]
    for k, t in oracle.tensors.items():
        assert torch.equal(t, again.tensors[k]) or torch.allclose(
            t, again.tensors[k], rtol=0, atol=0, equal_nan=True), k
