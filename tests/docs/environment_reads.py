"""Prints, as JSON, the names of the environment variables the project's own code reads while the
settings are imported (run as `python -m tests.docs.environment_reads` from the checkout's root).

os.environ is replaced, before anything is imported, by a mapping that records each name looked
up from a file of the checkout (outside .venv), so the answer holds however the settings are
split into modules and whichever helper reads them (django-environ, os.getenv, os.environ[...]);
what libraries read for themselves (Celery, psycopg) is not configuration of ours.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from types import FrameType

import environ

ROOT = Path(__file__).resolve().parent.parent.parent
# Frames of the readers themselves; the reader's caller is what counts.
_READERS = {os.__file__, __file__, *(str(path) for path in Path(environ.__file__).parent.glob("*.py"))}


class RecordingEnvironment(dict[str, str]):
    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.names: set[str] = set()

    def _record(self, name: str) -> None:
        frame: FrameType | None = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename in _READERS:
            frame = frame.f_back
        if frame is None:
            return
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(ROOT) and not path.is_relative_to(ROOT / ".venv"):
            self.names.add(name)

    def __getitem__(self, name: str) -> str:
        self._record(name)
        return super().__getitem__(name)

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self._record(name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self._record(name)
        return super().__contains__(name)


def main() -> None:
    recording = RecordingEnvironment(dict(os.environ))
    # Replaced, not cleared: a recording copy of the same values (B003 warns of the opposite intent).
    os.environ = recording  # type: ignore[assignment]  # noqa: B003
    # django-environ bound os.environ when it was imported above.
    environ.Env.ENVIRON = recording
    importlib.import_module(os.environ.get("DJANGO_SETTINGS_MODULE", "agentplatform.settings"))
    print(json.dumps(sorted(recording.names)))


if __name__ == "__main__":
    main()
