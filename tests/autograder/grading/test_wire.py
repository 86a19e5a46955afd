"""The wire format carries plain data exactly and refuses everything else."""

import collections
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.model import wire

plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=5) | st.integers(), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(plain)
def test_plain_values_round_trip_with_their_exact_types(value):
    back = wire.roundtrip(value)
    assert back == value
    assert _types(back) == _types(value)


def _types(value):
    if isinstance(value, (list, tuple)):
        return type(value), [_types(v) for v in value]
    if isinstance(value, dict):
        return dict, [(type(k), _types(v)) for k, v in value.items()]
    return type(value)


def test_non_finite_floats_round_trip():
    back = wire.roundtrip([math.inf, -math.inf, math.nan])
    assert back[:2] == [math.inf, -math.inf] and math.isnan(back[2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.int64, torch.bool])
def test_tensors_keep_values_shape_and_dtype(dtype):
    x = torch.arange(12).reshape(3, 4).to(dtype).t()  # a non-contiguous view
    back = wire.roundtrip({"x": x, "dtype": dtype, "shape": x.shape})
    assert type(back["x"]) is torch.Tensor
    assert back["x"].dtype == dtype and back["x"].shape == (4, 3)
    assert torch.equal(back["x"].to(torch.float32), x.to(torch.float32))
    assert back["dtype"] is dtype and back["shape"] == (4, 3)


def test_a_decoded_tensor_is_a_copy():
    x = torch.zeros(3)
    back = wire.roundtrip(x)
    back += 1
    assert torch.equal(x, torch.zeros(3))


def test_namedtuple_crosses_as_a_plain_tuple():
    Pair = collections.namedtuple("Pair", "a b")
    back = wire.roundtrip(Pair(1, 2))
    assert type(back) is tuple and back == (1, 2)


class AlwaysEqual(int):
    def __eq__(self, other):
        return True


class Sneaky(torch.Tensor):
    pass


@pytest.mark.parametrize(
    "value, where",
    [
        (AlwaysEqual(3), "value: a tests.autograder.grading.test_wire.AlwaysEqual"),
        ([1, object()], "value[1]: a builtins.object"),
        ({"a": {1.5: 2}}, "value['a']: dict key 1.5"),
        (torch.zeros(2).as_subclass(Sneaky), "value: a tests.autograder.grading.test_wire.Sneaky"),
        (torch.zeros(2, dtype=torch.complex64), "value: tensors of dtype torch.complex64"),
        (torch.zeros(2).to_sparse(), "value: only dense tensors"),
        (lambda: 1, "value: a builtins.function"),
    ],
)
def test_values_that_are_not_plain_data_are_refused_with_where(value, where):
    with pytest.raises(wire.WireError) as info:
        wire.encode(value)
    assert str(info.value).startswith(where)


def test_deep_nesting_is_refused():
    value = []
    for _ in range(wire.MAX_DEPTH + 2):
        value = [value]
    with pytest.raises(wire.WireError, match="nested deeper"):
        wire.encode(value)


def _frame(header: bytes, blob: bytes = b"") -> bytes:
    return wire.MAGIC + len(header).to_bytes(8, "big") + header + blob


@pytest.mark.parametrize(
    "frame, problem",
    [
        (b"", "bad magic"),
        (b"PICKLE" + b"\x00" * 20, "bad magic"),
        (wire.MAGIC + (10**6).to_bytes(8, "big") + b"{}", "truncated"),
        (_frame(b'{"value": NaN, "tensors": 0}'), "non-finite"),
        (_frame(b'{"value": 1}'), "expected keys"),
        (_frame(b'{"value": {"$evil": 1}, "tensors": 0}'), "tag '$evil'"),
        (_frame(b'{"value": {"$tensor": 0}, "tensors": 0}'), "tag '$tensor'"),
        (_frame(b'{"value": {"$tensor": 0}, "tensors": 1}', b"junk"), "malformed tensor blob"),
        (_frame(b'{"value": {"$dtype": "object"}, "tensors": 0}'), "tag '$dtype'"),
        (_frame(b'{"value": {"$dict": [[1.5, 2]]}, "tensors": 0}'), "dict entry"),
    ],
)
def test_malformed_frames_raise_wire_error(frame, problem):
    with pytest.raises(wire.WireError, match=problem.replace("$", "\\$")):
        wire.decode(frame)
