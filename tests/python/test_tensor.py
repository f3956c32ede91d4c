"""lathe.Tensor from Python: DLPack both ways without copies, metadata, ops vs PyTorch, errors."""
import numpy as np
import pytest
import torch

import lathe


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def test_numpy_round_trip_shares_memory():
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    t = lathe.from_dlpack(a)
    assert t.shape == [3, 4] and t.dtype == lathe.float32 and t.strides == [4, 1]
    b = np.from_dlpack(t)
    assert np.shares_memory(a, b)
    b[1, 2] = 42.0
    assert a[1, 2] == 42.0
    assert t.numpy()[1, 2] == 42.0


def test_torch_round_trip_shares_memory_and_strides():
    x = rand(4, 6).t()  # non-contiguous
    t = lathe.from_dlpack(x)
    assert t.shape == [6, 4] and t.strides == [1, 6] and not t.is_contiguous()
    assert t.data_ptr() == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr() and y.stride() == x.stride()
    y[0, 0] = -7.0
    assert x[0, 0].item() == -7.0


def test_result_tensor_exported_to_torch_and_numpy_without_copy():
    t = lathe.relu(lathe.from_dlpack(rand(5, 5)))
    y = torch.from_dlpack(t)
    n = np.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr() == n.ctypes.data
    del t  # the consumers keep the storage alive
    assert torch.equal(y, torch.from_numpy(n))


@pytest.mark.parametrize("dt, lt", [(torch.float64, lathe.float64), (torch.int64, lathe.int64),
                                    (torch.int32, lathe.int32), (torch.bool, lathe.bool)])
def test_dtypes_cross_dlpack(dt, lt):
    x = (torch.randn(7) * 10).to(dt)
    t = lathe.from_dlpack(x)
    assert t.dtype == lt
    assert torch.equal(torch.from_dlpack(t), x)


def test_unsupported_dtype_is_a_lathe_error():
    # float16 and bfloat16 cross (tests/python/test_bf16.py); complex has no Lathe dtype.
    with pytest.raises(lathe.Error, match=r"\[dlpack\].*no Lathe equivalent"):
        lathe.from_dlpack(torch.randn(3, dtype=torch.complex64))


def test_parameter_requiring_grad_imports_without_copy():
    p = torch.nn.Parameter(torch.randn(3, 3))
    t = lathe.from_dlpack(p)
    assert t.data_ptr() == p.data_ptr()


def test_ops_and_operators_match_torch():
    a, b = rand(3, 4), rand(3, 4)
    la, lb = lathe.from_dlpack(a), lathe.from_dlpack(b)
    checks = [
        (la + lb, a + b), (la - lb, a - b), (la * lb, a * b), (la / (lb.abs() + 1), a / (b.abs() + 1)),
        (la * 2.5, a * 2.5), (1.0 - la, 1.0 - a), (2.0 / (la.abs() + 1), 2.0 / (a.abs() + 1)),
        (-la, -a), (la @ lb.t(), a @ b.t()), (lathe.relu(la), torch.relu(a)),
        (lathe.gelu(la), torch.nn.functional.gelu(a)), (lathe.softmax(la, 1), a.softmax(1)),
        (lathe.sum(la, [1]), a.sum(1)), (lathe.mean(la), a.mean()),
        (lathe.amax(la, [0], True), a.amax(0, keepdim=True)),
        (lathe.cat([la, lb], 0), torch.cat([a, b])),
        (lathe.where(la > lb, la, lb), torch.where(a > b, a, b)),
        (la.reshape([4, 3]), a.reshape(4, 3)), (la.permute([1, 0]), a.permute(1, 0)),
        (lathe.layer_norm(la, [4]), torch.nn.functional.layer_norm(a, [4])),
    ]
    for got, want in checks:
        got = torch.from_dlpack(got)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_conv_and_pool_match_torch():
    x, w, bias = rand(2, 3, 9, 9), rand(4, 3, 3, 3), rand(4)
    got = lathe.conv2d(*map(lathe.from_dlpack, (x, w, bias)), stride=[2, 2], padding=[1, 1])
    torch.testing.assert_close(torch.from_dlpack(got),
                               torch.conv2d(x, w, bias, stride=2, padding=1), rtol=1e-4,
                               atol=1e-5)
    got = lathe.max_pool2d(lathe.from_dlpack(x), [3, 3], [2, 2])
    torch.testing.assert_close(torch.from_dlpack(got), torch.nn.functional.max_pool2d(x, 3, 2))


def test_factories_and_item():
    z = lathe.zeros([2, 3])
    assert z.numpy().sum() == 0 and z.dtype == lathe.float32
    assert lathe.full([], 3.5).item() == 3.5
    assert lathe.tensor([[1, 2], [3, 4]]).dtype == lathe.int64
    assert lathe.tensor([1.5]).tolist() == [1.5]
    assert lathe.arange(0, 5).numpy().tolist() == [0, 1, 2, 3, 4]


def test_errors_carry_lathe_messages():
    x = lathe.from_dlpack(rand(1, 3, 8, 8))
    w = lathe.from_dlpack(rand(4, 5, 3, 3))
    with pytest.raises(lathe.Error, match=r"\[conv2d\]"):
        lathe.conv2d(x, w)
    assert issubclass(lathe.Error, RuntimeError)
    with pytest.raises(lathe.Error, match="matmul"):
        lathe.matmul(lathe.zeros([2, 3]), lathe.zeros([4, 5]))
    with pytest.raises(lathe.Error, match="view"):
        lathe.zeros([2, 3]).view([7])
