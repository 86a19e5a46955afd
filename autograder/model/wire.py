"""The wire format: plain data only, across the trust boundary between grader and student code.

A value crosses as one frame: a JSON tree for the structure and one safetensors blob for the tensors.
Nothing is ever unpickled. Decoding rebuilds only Python builtins (None, bool, int, float, str, list,
tuple, dict with str or int keys), `torch.dtype` names from a fixed list, and dense tensors that
safetensors itself creates, so a decoded value can hold no student class: no `__eq__` that always
says yes, no tensor subclass, no lazy object that runs code when the grader looks at it.

Encoding checks exact types (`type(x) is int`, never `isinstance`), so a subclass of int or of
Tensor is refused with a message that names what was found and where.

Frame layout: b"LLMW1" | 8-byte big-endian header length | header (UTF-8 JSON) | safetensors blob.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import torch
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save

MAGIC = b"LLMW1"
MAX_FRAME_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 200_000
MAX_STR = 1_000_000
MAX_HEADER_BYTES = 16 * 1024 * 1024  # the JSON part: bounds what parsing it may build before any check

# Dtypes a value may name or a tensor may have; safetensors stores each of these exactly.
DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
        "int64", "int32", "int16", "int8", "uint8", "bool",
    )
    if hasattr(torch, name)
}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


class WireError(Exception):
    """A value that is not plain data, or a frame that is malformed or too large.

    Deliberately not a ValueError or TypeError: a test that expects the student's code to raise
    ValueError must not pass because the code returned something that cannot cross.
    """


def encode(value: Any) -> bytes:
    """Encode plain data into one frame. Raises WireError naming the offending part."""
    tensors: dict[str, torch.Tensor] = {}
    counter = [0]
    tree = _encode(value, tensors, "value", 0, counter)
    header = json.dumps({"value": tree, "tensors": len(tensors)}, allow_nan=False).encode()
    blob = _st_save(tensors) if tensors else b""
    if len(header) > MAX_HEADER_BYTES:
        raise WireError(f"value's plain part is {len(header)} bytes encoded; the limit is {MAX_HEADER_BYTES} "
                        "(return large data as tensors)")
    frame = MAGIC + struct.pack(">Q", len(header)) + header + blob
    if len(frame) > MAX_FRAME_BYTES:
        raise WireError(f"value is {len(frame)} bytes encoded; the limit is {MAX_FRAME_BYTES}")
    return frame


def decode(frame: bytes) -> Any:
    """Decode one frame into builtins and plain tensors; any deviation raises WireError."""
    if not isinstance(frame, (bytes, bytearray)):
        raise WireError(f"a frame must be bytes, not {type(frame).__name__}")
    if len(frame) > MAX_FRAME_BYTES:
        raise WireError(f"frame of {len(frame)} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    if frame[: len(MAGIC)] != MAGIC or len(frame) < len(MAGIC) + 8:
        raise WireError("not a wire frame (bad magic)")
    (header_len,) = struct.unpack(">Q", frame[len(MAGIC) : len(MAGIC) + 8])
    start = len(MAGIC) + 8
    if header_len > len(frame) - start:
        raise WireError("truncated frame")
    if header_len > MAX_HEADER_BYTES:
        raise WireError(f"frame header of {header_len} bytes exceeds the limit of {MAX_HEADER_BYTES}")
    try:
        header = json.loads(bytes(frame[start : start + header_len]), parse_constant=_no_constant)
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001  (json raises ValueError for an integer over Python's digit limit)
        raise WireError(f"malformed frame header: {type(exc).__name__}: {str(exc)[:200]}") from None
    if type(header) is not dict or set(header) != {"value", "tensors"} or type(header["tensors"]) is not int:
        raise WireError("malformed frame header: expected keys 'value' and 'tensors'")
    blob = bytes(frame[start + header_len :])
    tensors = _load_tensors(blob, header["tensors"])
    return _decode(header["value"], tensors, 0, [0])


def roundtrip(value: Any) -> Any:
    """What the other side of the boundary would receive: encode then decode (an independent copy)."""
    return decode(encode(value))


def describe(value: Any) -> str:
    """A short description of a decoded value for messages: type, and shape/dtype for tensors."""
    if type(value) is torch.Tensor:
        return f"Tensor(shape={tuple(value.shape)}, dtype={_DTYPE_NAMES.get(value.dtype, value.dtype)})"
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _no_constant(name: str) -> None:
    raise WireError(f"non-finite JSON constant {name} in frame")


def _encode(value: Any, tensors: dict, path: str, depth: int, counter: list[int]) -> Any:
    counter[0] += 1
    if counter[0] > MAX_NODES:
        raise WireError(f"value has more than {MAX_NODES} parts")
    if depth > MAX_DEPTH:
        raise WireError(f"{path}: nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if kind is str:
        if len(value) > MAX_STR:
            raise WireError(f"{path}: string of {len(value)} characters exceeds {MAX_STR}")
        return value
    if kind is list or kind is tuple:
        items = [_encode(v, tensors, f"{path}[{i}]", depth + 1, counter) for i, v in enumerate(value)]
        return items if kind is list else {"$tuple": items}
    if kind is torch.Size:
        return {"$tuple": [int(v) for v in value]}
    if kind is dict:
        pairs = []
        for key, item in value.items():
            if type(key) not in (str, int):
                raise WireError(f"{path}: dict key {key!r} is a {type(key).__name__}; keys must be str or int")
            pairs.append([key, _encode(item, tensors, f"{path}[{key!r}]", depth + 1, counter)])
        return {"$dict": pairs}
    if kind is torch.dtype:
        if value not in _DTYPE_NAMES:
            raise WireError(f"{path}: dtype {value} cannot cross the boundary")
        return {"$dtype": _DTYPE_NAMES[value]}
    if kind in _TENSOR_TYPES:
        return {"$tensor": _add_tensor(value, tensors, path)}
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        # A NamedTuple crosses as a plain tuple: the field names are the sender's class, not data.
        return _encode(tuple(value), tensors, path, depth, counter)
    raise WireError(
        f"{path}: a {kind.__module__}.{kind.__qualname__} is not plain data; return Python numbers, "
        "strings, lists, tuples, dicts or plain torch.Tensors"
    )


def _add_tensor(value: torch.Tensor, tensors: dict, path: str) -> int:
    if value.layout is not torch.strided or value.is_meta:
        raise WireError(f"{path}: only dense tensors can cross (got layout {value.layout})")
    if value.dtype not in _DTYPE_NAMES:
        raise WireError(f"{path}: tensors of dtype {value.dtype} cannot cross the boundary")
    index = len(tensors)
    tensors[str(index)] = value.detach().to("cpu").contiguous().clone()
    return index


def _load_tensors(blob: bytes, count: int) -> dict[str, torch.Tensor]:
    # The count is the sender's claim: bounded before anything is built from it (each tensor takes
    # at least a few bytes of the blob's own header).
    if count < 0 or count > min(MAX_NODES, len(blob)) or (count == 0) != (len(blob) == 0):
        raise WireError("frame's tensor count does not match its tensor blob")
    if count == 0:
        return {}
    try:
        tensors = _st_load(blob)
    except Exception as exc:  # safetensors raises its own error types for malformed blobs
        raise WireError(f"malformed tensor blob: {str(exc)[:200]}") from None
    if len(tensors) != count or set(tensors) != {str(i) for i in range(count)}:
        raise WireError("frame's tensor names do not match its tensor count")
    return tensors


def _decode(node: Any, tensors: dict, depth: int, counter: list[int]) -> Any:
    counter[0] += 1
    if counter[0] > MAX_NODES or depth > MAX_DEPTH:
        raise WireError("frame value is too large or too deep")
    kind = type(node)
    if kind is str and len(node) > MAX_STR:
        raise WireError(f"frame holds a string of {len(node)} characters; the limit is {MAX_STR}")
    if node is None or kind in (bool, int, float, str):
        return node
    if kind is list:
        return [_decode(v, tensors, depth + 1, counter) for v in node]
    if kind is not dict or len(node) != 1:
        raise WireError(f"malformed frame value of type {kind.__name__}")
    (tag, body), = node.items()
    if tag == "$tuple" and type(body) is list:
        return tuple(_decode(v, tensors, depth + 1, counter) for v in body)
    if tag == "$dict" and type(body) is list:
        out = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) not in (str, int):
                raise WireError("malformed dict entry in frame")
            out[pair[0]] = _decode(pair[1], tensors, depth + 1, counter)
        return out
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$dtype" and body in DTYPES:
        return DTYPES[body]
    if tag == "$tensor" and type(body) is int and str(body) in tensors:
        tensor = tensors[str(body)]
        if type(tensor) is not torch.Tensor:
            raise WireError("decoded tensor is not a plain torch.Tensor")
        return tensor
    raise WireError(f"malformed frame value with tag {tag!r}")
