"""Body templates with a call's message baked in: the sender's fast path for the usual compact records.

A body is ``form % (timestamp, quoted message, line, seq)``, where the message is ``msg % arg``. For a call site
logging with no argument, or with one ``int`` argument, the message's own text can sit in the template itself:
JSON-quoting leaves every ``%`` conversion of ``msg`` intact, and an int's conversions (``%s``, ``%d``, ``%x``,
``%.2f``, ...) write digits, signs, letters, dots and blanks only, which JSON never escapes. The sender then skips
the ``msg % arg`` string and its quoting per record (about 0.15 us each on the sender thread, the GIL the logging
thread waits for) and formats the int straight into the body, byte for byte the same. ``%c`` (any character) and
formats that take another number of arguments are refused: a template is only kept after it wrote what the
generic path writes for a few probe values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_quote = json.encoder.encode_basestring  # the C string escaper json itself uses

# int arguments written the same by both paths, whatever the conversion: zero catches %c (a NUL is escaped in JSON
# and would not be in the template), the others signs, widths and the digits of a long int
PROBES = (0, -7, 1234567, 10**25)
_PROBE_STAMP = "1970-01-01T00:00:00.000Z"

# a call site: the form key (level, logger, thread, process, module, function), line and msg (record.CALL_KEY)
CallKey = tuple[Any, ...]
# a form key -> the template around the message's slot and the line's (record.RecordEncoder._form_parts)
FormParts = Callable[[tuple[Any, ...]], tuple[str, str, str]]


@dataclass(slots=True)
class BakedForms:
    """Per call site (``CALL_KEY``), the body template with the message and the line in it: ``bare`` for calls
    without arguments (filled with timestamp and seq), ``ints`` for calls with one int (timestamp, the int, seq).
    A call site whose message cannot be baked is remembered in ``refused``; at most ``limit`` entries each."""

    parts: FormParts
    limit: int
    bare: dict[CallKey, str] = field(default_factory=dict)
    ints: dict[CallKey, str] = field(default_factory=dict)
    refused: set[CallKey] = field(default_factory=set)

    def bake(self, key: CallKey, with_int: bool) -> str | None:
        """The template of ``key`` (a call site not in the table yet), or None when it must take the generic path
        (refused, or the table is full)."""
        table = self.ints if with_int else self.bare
        if (key, with_int) in self.refused or len(table) >= self.limit:
            return None
        head, middle, end = self.parts(key[:6])
        line, msg = key[6], key[7]
        if type(line) is not int:  # what %d would write is only sure for an int (a record's lineno is one)
            return None
        tail = f"{middle}{line}{end}"
        if not with_int:  # the message is msg itself: literal text, its '%' too
            template: str | None = f"{head}{_quote(msg).replace('%', '%%')}{tail}"
        else:
            template = _checked(head, tail, msg)
        if template is None:
            if len(self.refused) < self.limit:
                self.refused.add((key, with_int))
            return None
        table[key] = template
        return template


def _checked(head: str, tail: str, msg: str) -> str | None:
    """``msg`` baked into the template when that writes exactly what ``msg % arg`` quoted writes for int arguments."""
    template = f"{head}{_quote(msg)}{tail}"
    generic = f"{head}%s{tail}"
    try:
        for value in PROBES:
            if template % (_PROBE_STAMP, value, 1) != generic % (_PROBE_STAMP, _quote(msg % value), 1):
                return None
    except Exception:  # the format does not take one int (or not this way): the generic path names the call
        return None
    return template
