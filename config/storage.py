"""Static files storage for `make run`: compressed copies that are made again only when
their file changed (WhiteNoise's storage compresses every file on every collectstatic,
which costs most of a minute for Plotly's bundle with Brotli)."""

from __future__ import annotations

import os
from typing import Any

from whitenoise.storage import CompressedStaticFilesStorage

COMPRESSED_SUFFIXES = (".br", ".gz")


class IncrementalCompressedStaticFilesStorage(CompressedStaticFilesStorage):
    def post_process(self, paths: dict[str, Any], dry_run: bool = False, **options: Any):
        stale = {path: value for path, value in paths.items() if not self._compressed(path)}
        yield from super().post_process(stale, dry_run=dry_run, **options)

    def _compressed(self, path: str) -> bool:
        """Some compressed copy of `path` is at least as new as the file itself."""
        full = self.path(path)
        try:
            mtime = os.stat(full).st_mtime
        except OSError:
            return False
        for suffix in COMPRESSED_SUFFIXES:
            try:
                if os.stat(full + suffix).st_mtime >= mtime:
                    return True
            except OSError:
                continue
        return False
