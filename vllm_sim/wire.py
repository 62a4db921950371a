"""How messages cross the pipe between the API server and the engine core.

The two sent on every engine step, `("step", seq, generated, finished, decoding)` and
`("stepped", seq)`, are packed with `struct` (a tag byte and unsigned 64-bit fields); everything
else (lifecycle, utility calls and their results) is pickled behind its own tag. Packing the step
messages halves the cost of a round trip against pickling them (bench/bench_sim_steps.py).
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

_STEP = struct.Struct("<cQQQQ")
_STEPPED = struct.Struct("<cQ")
_PICKLED = b"p"


def encode(message: tuple[Any, ...]) -> bytes:
    kind = message[0]
    if kind == "step":
        return _STEP.pack(b"s", *message[1:])
    if kind == "stepped":
        return _STEPPED.pack(b"a", message[1])
    return _PICKLED + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> tuple[Any, ...]:
    tag = data[:1]
    if tag == b"s":
        return ("step", *_STEP.unpack(data)[1:])
    if tag == b"a":
        return ("stepped", _STEPPED.unpack(data)[1])
    if tag != _PICKLED:
        raise ValueError(f"not a simulator message: {data[:16]!r}")
    message = pickle.loads(data[1:])  # our own child's bytes, from a pipe no one else holds
    if not isinstance(message, tuple):
        raise ValueError(f"not a simulator message: {message!r}")
    return message
