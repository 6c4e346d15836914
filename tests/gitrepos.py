"""Real git repositories for tests: a small builder over the git CLI.

    tree = GitWorkTree.create(tmp_path / "handbook")
    tree.write("docs/index.md", "# Title\n")
    first = tree.commit("add index")          # -> full commit SHA
    tree.rename("docs/index.md", "docs/home.md")
    tree.delete("README.md")
    tree.symlink("docs/link.md", "../../etc/passwd")
    second = tree.commit("rename")

`tree.path` is the work tree; pass `str(tree.path)` or `tree.file_url` as a repository URL.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


@dataclass
class GitWorkTree:
    path: Path

    @classmethod
    def create(cls, path: Path, *, branch: str = "main") -> GitWorkTree:
        path.mkdir(parents=True, exist_ok=True)
        tree = cls(path)
        tree.git("init", "--quiet", "--initial-branch", branch)
        return tree

    @property
    def file_url(self) -> str:
        return self.path.resolve().as_uri()

    def git(self, *args: str) -> str:
        completed = subprocess.run(
            ["git", "-C", str(self.path), *args],
            capture_output=True,
            text=True,
            env={**os.environ, **_GIT_ENV},
            check=False,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {completed.stderr}")
        return completed.stdout

    def write(self, relative_path: str, content: str | bytes) -> Path:
        target = self.path / relative_path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
        return target

    def delete(self, relative_path: str) -> None:
        self.git("rm", "--quiet", relative_path)

    def rename(self, old: str, new: str) -> None:
        (self.path / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)

    def symlink(self, relative_path: str, target: str) -> None:
        link = self.path / relative_path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)

    def commit(self, message: str) -> str:
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def branch(self, name: str) -> None:
        self.git("checkout", "--quiet", "-b", name)

    def checkout(self, name: str) -> None:
        self.git("checkout", "--quiet", name)

    def tag(self, name: str) -> None:
        self.git("tag", name)

    def show(self, commit: str, relative_path: str) -> bytes:
        completed = subprocess.run(
            ["git", "-C", str(self.path), "show", f"{commit}:{relative_path}"], capture_output=True, check=True
        )
        return completed.stdout
