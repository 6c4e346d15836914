"""The shell examples of README.md and docs/*.md, and how each is run and checked.

An example is a fenced block tagged `sh` or `bash`. Each runs in bash (`set -euo pipefail`, so an
undefined variable or a failing command fails it) in a working directory of its own document,
where `.venv`, `manage.py` and `scripts` are the checkout's and `var` is the live service's VAR_DIR, with
the service's environment. The documented addresses (`http://127.0.0.1:8000`, `:8001`, `:8002`)
are replaced by the live web, stream and MCP processes' addresses. Variables an example
`export`s, and files it writes, are there for the examples after it in the same document.

Every `curl` is checked for its HTTP status: the one its trailing comment starts with
(`curl ... # 404 problem`), else any 2xx. A curl given `--max-time` (an open stream) may be ended by
it. A block preceded by `<!-- not run: <reason> -->` is not run (the test lists them).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCUMENTED_ADDRESSES = {
    "web": "http://127.0.0.1:8000",
    "stream": "http://127.0.0.1:8001",
    "mcp": "http://127.0.0.1:8002",
}

_FENCE = re.compile(
    r"^(?:<!-- not run: (?P<reason>[^>]*?) -->\n)?```(?P<language>[\w-]*)\n(?P<body>.*?)^```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_EXPECTED_STATUS = re.compile(r"\s#\s*(\d{3})\b")
STATUS_MARK = "HTTP-STATUS"

# Each curl reports its status on standard error; `--max-time` set by the example itself ends an
# open stream, which is what it asks for (curl's exit status 28).
PREAMBLE = f"""\
set -euo pipefail
curl() {{
  local status=0
  command curl --silent --show-error -w '%{{stderr}}{STATUS_MARK} %{{http_code}}\\n' "$@" || status=$?
  if [ "$status" = 28 ] && [[ " $* " == *" --max-time "* ]]; then return 0; fi
  return "$status"
}}
[ -f .exports.sh ] && source .exports.sh
trap 'export -p > .exports.sh' EXIT
"""


@dataclass(frozen=True)
class Example:
    document: Path
    line: int
    language: str
    body: str
    not_run_reason: str | None

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        """The block's commands, continuation lines joined."""
        joined = re.sub(r"\\\n\s*", " ", self.body)
        return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]

    def expected_statuses(self) -> list[str]:
        """Per curl command, in order: its stated status, or `2xx`."""
        expected = []
        for command in self.commands():
            words = command.split()
            if words and words[0] == "curl":
                stated = _EXPECTED_STATUS.search(command)
                expected.append(stated[1] if stated else "2xx")
        return expected


def examples() -> list[Example]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text()
        for match in _FENCE.finditer(text):
            if match["language"] in {"sh", "bash", "console"}:
                found.append(
                    Example(
                        document=document,
                        line=text.count("\n", 0, match.start("body")),
                        language=match["language"],
                        body=match["body"],
                        not_run_reason=match["reason"],
                    )
                )
    return found


def example_run(example: Example, *, directory: Path, environment: dict[str, str], addresses: dict[str, str]) -> str:
    """Runs `example` in `directory`; the problems found, or an empty string."""
    body = example.body
    for name, documented in DOCUMENTED_ADDRESSES.items():
        body = body.replace(documented, addresses[name])
    result = subprocess.run(
        ["bash", "-c", PREAMBLE + body],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    statuses = re.findall(rf"^{STATUS_MARK} (\d{{3}})$", result.stderr, flags=re.MULTILINE)
    expected = example.expected_statuses()
    problems = []
    if result.returncode != 0:
        problems.append(f"exit status {result.returncode}")
    if len(statuses) != len(expected) or not all(
        status == want or (want == "2xx" and status.startswith("2"))
        for status, want in zip(statuses, expected, strict=True)
    ):
        problems.append(f"HTTP statuses {statuses}, expected {expected}")
    if not problems:
        return ""
    stderr = re.sub(rf"^{STATUS_MARK} .*\n", "", result.stderr, flags=re.MULTILINE)
    return (
        f"{example.where}: {'; '.join(problems)}\n--- example\n{example.body}--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{stderr[-3000:]}"
    )


def document_directory(base: Path, document: Path, var_dir: Path) -> Path:
    """A working directory for one document's examples, laid out as a checkout after `make run`."""
    directory = base / shlex.quote(document.stem).strip("'")
    directory.mkdir(parents=True)
    (directory / ".venv").symlink_to(ROOT / ".venv")
    (directory / "manage.py").symlink_to(ROOT / "manage.py")
    (directory / "scripts").symlink_to(ROOT / "scripts")
    (directory / "var").symlink_to(var_dir)
    return directory
