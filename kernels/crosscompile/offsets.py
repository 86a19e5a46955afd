"""32-bit offsets: pointer arithmetic in int32 that a tensor of more than 2³¹ elements overflows.

No test on a CPU or a GPU reaches 2³¹ elements, so the mistake shows only in production. The handouts
ask for int64 offsets (`tl.program_id(0).to(tl.int64)`). This finds, in a build's Triton IR, each
`tt.addptr` whose offset is a 32-bit integer computed from a product with a program id (`pid * BLOCK`,
`row * stride`): a program id widened to int64 before the product gives 64-bit offsets and is not
flagged. It reads the data flow of the IR, one SSA line at a time: it may miss a product carried
through a loop's arguments, but what it flags is a 32-bit pointer offset from a program-id product.
An offset legitimately bounded by 2³¹ (rows within one head) is flagged too, so a suite asks for the
check only where its handout requires int64 offsets.
"""

from __future__ import annotations

import re
from pathlib import Path

_OP = re.compile(r"^\s*(%[\w.#]+)(?::\d+)? = ([\w.]+)\b(.*)$")
_LOC_FILE = re.compile(r'^(#loc\d*) = loc\("([^"]+)":(\d+):\d+\)', re.M)
_LOC_NAMED = re.compile(r'^(#loc\d*) = loc\("[^"]*"\((#loc\d*)\)\)', re.M)


def _is_32_bit(types: str) -> bool:
    last = re.split(r"->| to |, ", types)[-1].strip()
    return last == "i32" or last.endswith("xi32>")


def _places(ttir: str) -> dict[str, str]:
    """{"#loc12": "kernel.py:50"}: each location alias of the IR resolved to a file and line."""
    places = {name: f"{Path(path).name}:{line}" for name, path, line in _LOC_FILE.findall(ttir)}
    named = dict(_LOC_NAMED.findall(ttir))
    for _ in range(8):  # aliases of aliases, a few deep
        for name, target in named.items():
            if target in places:
                places.setdefault(name, places[target])
    return places


def int32_offsets(ttir: str) -> list[str]:
    """The source places (file:line) of each pointer offset computed in 32 bits from a program-id product."""
    from_pid, products, found = set(), set(), []
    places = _places(ttir)
    for line in ttir.splitlines():
        match = _OP.match(line)
        if not match:
            continue
        result, op, rest = match.groups()
        body, _, types = rest.split(" loc(")[0].partition(" : ")
        operands = re.findall(r"%[\w.#]+", body)
        if op == "tt.get_program_id":
            from_pid.add(result)
        elif op == "tt.addptr" and len(operands) == 2 and operands[1] in products and _is_32_bit(types):
            where = re.search(r"loc\((#loc\d*)\)", rest)
            found.append(places.get(where.group(1), "?") if where else "?")
        elif _is_32_bit(types) and any(o in from_pid | products for o in operands):
            grows = op == "arith.muli" or any(o in products for o in operands)
            (products if grows else from_pid).add(result)
    return sorted(set(found))
