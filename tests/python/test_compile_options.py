"""lathe.compile_options / lathe.set_compile_options: the process default of the C++
CompileOptions, read once from the environment and settable from Python."""
import pytest
import torch

import lathe


@pytest.fixture
def restore_options():
    saved = lathe.compile_options()
    yield
    lathe.set_compile_options(**saved)


def test_defaults_are_the_cpp_struct():
    o = lathe.compile_options()
    assert o["backend"] == "cpu" and o["recompile_limit"] == 8 and o["dynamic"] is None
    assert o["freeze"] is True and o["verify_calls"] == 10


def test_set_from_python_reaches_compile(restore_options):
    lathe.set_compile_options(backend="interpreter", verify=True, verify_calls=2, logs="graph")
    o = lathe.compile_options()
    assert o["backend"] == "interpreter" and o["verify"] and o["logs"] == "graph"
    assert "backend=interpreter" in lathe._C._compile_options_string()

    @lathe.compile
    def f(x):
        return lathe.relu(x)

    for _ in range(3):
        f(lathe.from_dlpack(torch.randn(3)))
    assert f.stats()["verified_calls"] == 2


def test_unknown_option_or_topic_is_an_error(restore_options):
    with pytest.raises(Exception, match="unknown compile option 'bogus'"):
        lathe.set_compile_options(bogus=1)
    with pytest.raises(Exception, match="unknown log topic"):
        lathe.set_compile_options(logs="nope")
