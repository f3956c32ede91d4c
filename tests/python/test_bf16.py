"""bf16 and f16 against PyTorch's: the casts bit for bit (NaN, inf, ties, subnormals), DLPack
without copies, and ops on odd sizes and strides against torch's bf16 results and against the
fp64 reference (accumulation in f32, never in bf16)."""
import pytest
import torch
import torch.nn.functional as F

import lathe

LOW = [(torch.bfloat16, lathe.bfloat16), (torch.float16, lathe.float16)]


def to_lathe(t):
    return lathe.from_dlpack(t.contiguous() if not t.is_contiguous() else t)


def to_torch(t):
    return torch.from_dlpack(t)


def probe_values():
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(-(2**31), 2**31 - 1, (20000,), generator=g, dtype=torch.int64)
    x = bits.to(torch.int32).view(torch.float32)
    x = x[~torch.isnan(x)]
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.00390625,
                            1.01171875, 3.4028235e38, 1e-40, 65504.0, 65519.99, 65520.0,
                            5.9604645e-08, 2.9802322e-08, 8.940697e-08, 6.1035156e-05])
    return torch.cat([x, special, special.nextafter(torch.tensor(float("inf")))])


@pytest.mark.parametrize("tdt,ldt", LOW)
def test_casts_match_torch_bit_for_bit(tdt, ldt):
    x = probe_values()
    got = to_torch(to_lathe(x).to(ldt))
    want = x.to(tdt)
    assert got.dtype == tdt
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16))
    # And back to f32 exactly.
    back = to_torch(to_lathe(want).to(lathe.float32))
    assert torch.equal(back[~nan], want[~nan].float())


@pytest.mark.parametrize("tdt,ldt", LOW)
def test_dlpack_shares_memory(tdt, ldt):
    x = torch.randn(5, 7).to(tdt).t()
    t = lathe.from_dlpack(x)
    assert t.dtype == ldt and t.shape == [7, 5] and t.data_ptr() == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.dtype == tdt and y.data_ptr() == x.data_ptr()
    assert lathe.tensor([1.5, -2.0], dtype=ldt).to(lathe.float32).tolist() == [1.5, -2.0]
    assert lathe.full([2], 0.25, dtype=ldt).tolist() == [0.25, 0.25]


def ulps(a, b):
    """Distance in units of the last place between two bf16/f16 tensors of finite values."""
    ia, ib = a.view(torch.int16).to(torch.int64), b.view(torch.int16).to(torch.int64)
    # Map the sign-magnitude patterns onto a monotonic integer line.
    ia = torch.where(ia < 0, -(ia & 0x7FFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFF), ib)
    return (ia - ib).abs()


POINTWISE = [
    ("add", lambda a, b: lathe.add(a, b), lambda a, b: a + b, 0),
    ("mul", lambda a, b: lathe.mul(a, b), lambda a, b: a * b, 0),
    ("div", lambda a, b: lathe.div(a, b), lambda a, b: a / b, 0),
    ("relu", lambda a, b: lathe.relu(a), lambda a, b: torch.relu(a), 0),
    ("maximum", lambda a, b: lathe.maximum(a, b), lambda a, b: torch.maximum(a, b), 0),
    ("exp", lambda a, b: lathe.exp(a), lambda a, b: torch.exp(a), 1),
    ("tanh", lambda a, b: lathe.tanh(a), lambda a, b: torch.tanh(a), 1),
    ("sigmoid", lambda a, b: lathe.sigmoid(a), lambda a, b: torch.sigmoid(a), 1),
    # gelu = x/2 (1 + erf(x/sqrt 2)): in f32 the sum cancels in the negative tail (x < -3),
    # where both Lathe and torch land a few 16-bit ulps off the exact value.
    ("gelu", lambda a, b: lathe.gelu(a), lambda a, b: F.gelu(a), 4),
    ("silu", lambda a, b: lathe.silu(a), lambda a, b: F.silu(a), 1),
]


@pytest.mark.parametrize("tdt,ldt", LOW)
@pytest.mark.parametrize("name,lf,tf,max_ulps", POINTWISE, ids=[p[0] for p in POINTWISE])
def test_pointwise_rounds_once_like_torch(tdt, ldt, name, lf, tf, max_ulps):
    torch.manual_seed(1)
    a = (torch.randn(37, 29) * 3).to(tdt)
    b = (torch.randn(29, 37) * 3 + 0.1).to(tdt).t()  # strided
    got = to_torch(lf(lathe.from_dlpack(a), lathe.from_dlpack(b)))
    want = tf(a, b)
    assert got.dtype == tdt and got.shape == want.shape
    fin = torch.isfinite(want)
    assert torch.equal(torch.isfinite(got), fin)
    if max_ulps == 0:  # exact in f32, then rounded once: torch's bits
        assert torch.equal(got[fin].view(torch.int16), want[fin].view(torch.int16))
    # Within max_ulps of the correctly rounded value (fp64 of the same inputs, rounded).
    # Where an f32 formula cancels (gelu's tail), an absolute error of an f32 ulp of the input
    # is allowed instead.
    exact = tf(a.double(), b.double()).to(tdt)
    close = ulps(got[fin], exact[fin]) <= max_ulps
    floor = (got[fin].double() - exact[fin].double()).abs() <= 2.0**-23 * a.double().abs()[fin]
    assert bool((close | floor).all())


@pytest.mark.parametrize("tdt,ldt", LOW)
def test_nan_and_inf_propagate(tdt, ldt):
    a = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0, 0.0]).to(tdt)
    b = torch.tensor([1.0, 1.0, 1.0, float("inf"), 0.0]).to(tdt)
    la, lb = lathe.from_dlpack(a), lathe.from_dlpack(b)
    for got, want in [(lathe.add(la, lb), a + b), (lathe.mul(la, lb), a * b),
                      (lathe.div(la, lb), a / b), (lathe.exp(la), torch.exp(a))]:
        torch.testing.assert_close(to_torch(got), want, equal_nan=True, rtol=0, atol=0)


def reduced_ops():
    return [
        ("matmul", lambda x: (x[0], x[1].t()), lambda a, b: lathe.matmul(a, b),
         lambda a, b: a @ b),
        ("linear", lambda x: (x[0], x[1]), lambda a, w: lathe.linear(a, w),
         lambda a, w: F.linear(a, w)),
        ("sum", lambda x: (x[0],), lambda a: lathe.sum(a, [1]), lambda a: a.sum(1)),
        ("mean", lambda x: (x[0],), lambda a: lathe.mean(a), lambda a: a.mean()),
        ("softmax", lambda x: (x[0],), lambda a: lathe.softmax(a, 1), lambda a: a.softmax(1)),
        ("layer_norm", lambda x: (x[0],), lambda a: lathe.layer_norm(a, [131]),
         lambda a: F.layer_norm(a, [131])),
    ]


@pytest.mark.parametrize("tdt,ldt", LOW)
@pytest.mark.parametrize("name,make,lf,tf", reduced_ops(), ids=[r[0] for r in reduced_ops()])
def test_reductions_and_contractions_accumulate_in_f32(tdt, ldt, name, make, lf, tf):
    torch.manual_seed(2)
    x = [torch.randn(23, 131).to(tdt), torch.randn(17, 131).to(tdt)]
    args = make(x)
    got = to_torch(lf(*[lathe.from_dlpack(a) for a in args])).double()
    ref = tf(*[a.double() for a in args])  # the fp64 reference of the same bf16 values
    want = tf(*args).double()  # torch's own bf16 result
    eps = 2.0 ** -8 if tdt == torch.bfloat16 else 2.0 ** -11
    scale = ref.abs().max().item() + 1e-30
    # Rounded once from an f32 result: within an ulp or so of the exact value, as torch is.
    assert (got - ref).abs().max().item() <= 2 * eps * scale
    assert (got - want).abs().max().item() <= 2 * eps * scale


@pytest.mark.parametrize("tdt,ldt", LOW)
def test_long_sum_is_not_accumulated_in_16_bits(tdt, ldt):
    x = torch.full((100000,), 0.01).to(tdt)
    got = to_torch(lathe.sum(lathe.from_dlpack(x))).double().item()
    ref = x.double().sum().item()
    assert abs(got - ref) <= 2 ** -7 * ref  # a 16-bit accumulator stalls far below


@pytest.mark.parametrize("tdt,ldt", LOW)
def test_conv2d_against_torch(tdt, ldt):
    torch.manual_seed(3)
    x = torch.randn(2, 5, 11, 9).to(tdt).contiguous(memory_format=torch.channels_last)
    w = torch.randn(7, 5, 3, 3).to(tdt)
    got = to_torch(lathe.conv2d(lathe.from_dlpack(x), lathe.from_dlpack(w), padding=[1, 1]))
    ref = F.conv2d(x.double(), w.double(), padding=1)
    assert got.dtype == tdt
    eps = 2.0 ** -8 if tdt == torch.bfloat16 else 2.0 ** -11
    assert (got.double() - ref).abs().max().item() <= 2 * eps * ref.abs().max().item()


def test_mixed_dtypes_promote_like_torch():
    a = torch.randn(4).to(torch.bfloat16)
    h = torch.randn(4).to(torch.float16)
    f = torch.randn(4)
    la, lh, lf = map(lathe.from_dlpack, (a, h, f))
    assert to_torch(lathe.add(la, lh)).dtype == (a + h).dtype == torch.float32
    assert to_torch(lathe.add(la, lf)).dtype == torch.float32
    assert to_torch(lathe.mul(la, 2.5)).dtype == torch.bfloat16
