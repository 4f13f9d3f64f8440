"""Atomic file writes: readers see the old file or the new one, never a partial one.

The data goes to a temporary file beside the target (``.{name}.tmp-{pid}``, so
the rename stays on one file system and concurrent processes do not share
it), is flushed and fsynced, then renamed over the target with
:func:`os.replace`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["write_bytes_atomic", "write_json_atomic"]


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, creating missing parent directories.

    Args:
        path: The target file; replaced if it exists.
        data: The complete new contents.

    Raises:
        OSError: When the directory cannot be created or the file written; the
            target is then left as it was and the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as JSON (``indent=1``, non-JSON values via ``str``) to ``path`` atomically.

    Args:
        path: The target file; replaced if it exists.
        obj: A JSON-serializable value; other values (paths, dtypes) are written as ``str(value)``.
    """
    write_bytes_atomic(path, json.dumps(obj, indent=1, default=str).encode("utf-8"))
