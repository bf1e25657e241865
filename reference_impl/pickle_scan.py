"""A pre-check of pickle bytes before the C unpickler sees them: memo-index bombs.

The C unpickler grows its memo table to the largest index a PUT / LONG_BINPUT names: six
bytes naming index 2**30 make it allocate and clear gigabytes before anything fails (found
by the fuzzer). A real pickle never names an index beyond its own length, so those are
refused - and so is a pickle whose opcodes cannot be walked to STOP: the C unpickler reads
truncated opcodes differently (the fuzzer found a 28-byte one that still made it allocate
gigabytes).

The walk only finds opcode boundaries (argument lengths from pickletools' opcode table); it
does not decode arguments, which is what makes it ~4x faster than pickletools.genops. The
unpickler still validates every argument itself. tests/reliability/test_pickle_scan.py checks
it against genops on fuzzed pickles.
"""

from __future__ import annotations

import pickle
import pickletools

# Table entries: > 0 is the whole length of an opcode with a fixed-size (or no) argument;
# the negative codes below say how the argument is read.
_UNKNOWN, _STOP, _LONG_BINPUT, _PUT, _LINE, _TWO_LINES, _LEN1, _LEN4, _LEN8 = range(-9, 0)


def _opcode_table() -> list[int]:
    # A signed 4-byte length read as unsigned: a negative one runs past the end, refused alike.
    by_length_width = {pickletools.TAKEN_FROM_ARGUMENT1: _LEN1, pickletools.TAKEN_FROM_ARGUMENT4: _LEN4,
                       pickletools.TAKEN_FROM_ARGUMENT4U: _LEN4, pickletools.TAKEN_FROM_ARGUMENT8U: _LEN8}
    special = {"STOP": _STOP, "LONG_BINPUT": _LONG_BINPUT, "PUT": _PUT}
    table = [_UNKNOWN] * 256
    for op in pickletools.opcodes:
        arg = op.arg
        if op.name in special:
            entry = special[op.name]
        elif arg is None:
            entry = 1
        elif arg.n > 0:
            entry = 1 + arg.n
        elif arg.n == pickletools.UP_TO_NEWLINE:  # GLOBAL and INST read two lines (module, name)
            entry = _TWO_LINES if arg.name == "stringnl_noescape_pair" else _LINE
        else:
            entry = by_length_width[arg.n]
        table[ord(op.code)] = entry
    return table


_TABLE = _opcode_table()


def check_memo_indices(data: bytes) -> None:
    """Raise pickle.UnpicklingError when `data` names a memo index beyond its own length or
    cannot be walked opcode by opcode to STOP; return when the C unpickler may have it."""
    if b"r" not in data and b"p" not in data:  # neither opcode byte anywhere: no index to name
        return
    size = len(data)
    pos = 0
    table = _TABLE
    while pos < size:
        step = table[data[pos]]
        if step > 0:  # most opcodes: no argument, or one of fixed size
            pos += step
            continue
        if step == _LEN1:  # next most: SHORT_BINUNICODE / SHORT_BINBYTES (names, short payloads)
            pos += 1
            if pos >= size:
                break
            pos += 1 + data[pos]
            continue
        if step == _STOP:
            return
        if step == _UNKNOWN:
            raise pickle.UnpicklingError(f"malformed pickle: opcode {data[pos:pos + 1]!r} at byte {pos} is unknown")
        pos += 1
        if step == _LONG_BINPUT:
            end = pos + 4
            if end > size:
                break
            _check_index(int.from_bytes(data[pos:end], "little"), size)
            pos = end
        elif step == _LINE or step == _PUT or step == _TWO_LINES:
            end = data.find(b"\n", pos)
            if end < 0:
                break
            if step == _PUT:
                try:
                    index = int(data[pos:end])
                except ValueError:
                    raise pickle.UnpicklingError(f"malformed pickle: PUT index {bytes(data[pos:end][:20])!r}") from None
                _check_index(index, size)
            elif step == _TWO_LINES:
                end = data.find(b"\n", end + 1)
                if end < 0:
                    break
            pos = end + 1
        else:  # a 4- or 8-byte length, then that many bytes
            head = pos + (8 if step == _LEN8 else 4)
            if head > size:
                break
            pos = head + int.from_bytes(data[pos:head], "little")
    raise pickle.UnpicklingError(f"malformed pickle: truncated, or no STOP opcode in its {size} bytes")


def _check_index(index: int, size: int) -> None:
    if index > size:
        raise pickle.UnpicklingError(f"memo index {index} of a {size}-byte pickle (a memory bomb, not a pickled value)")
