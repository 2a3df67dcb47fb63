"""TOML text read into a document, every failure a ``tomllib.TOMLDecodeError`` saying why.

tomllib raises its own error for a syntax mistake, but a bare ValueError for an integer of more
digits than Python converts (4,300) and a RecursionError for arrays or tables nested thousands
deep: each ended `check-config` (and every command loading the configuration, a profile or a
scenario) in a traceback. The configuration, the profiles, the scenarios and a bundle's
config.toml are read here, so each says it as its other TOML mistakes.
"""

from __future__ import annotations

import sys
import tomllib
from typing import Any


def toml_document(text: str) -> dict[str, Any]:
    """``text`` parsed, or tomllib.TOMLDecodeError naming what could not be read."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except ValueError as exc:  # not tomllib's own: int()'s limit on the digits it reads from text
        if "integer string conversion" not in str(exc):
            raise tomllib.TOMLDecodeError(str(exc)) from None
        limit = sys.get_int_max_str_digits()
        raise tomllib.TOMLDecodeError(
            f"an integer of more than {limit:,} digits, more than any key takes"
        ) from None
    except RecursionError:
        raise tomllib.TOMLDecodeError("arrays or tables nested too deeply to read") from None
