"""tests/gitserver.py's git smart-HTTP server as a process of its own, for a test that runs it on
another host (a network namespace: tests/hosts.py):

    python -m tests.gitserver_process ROOT ADDRESS PORT

serves the bare repositories under ROOT (read-only, no token) on ADDRESS:PORT, prints
`serving http://ADDRESS:PORT` once it listens, and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from tests.gitserver import GitHttpServer


def main() -> None:
    root, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    # Blocked before the server's threads start, so that they inherit the mask and sigwait gets them.
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    server = GitHttpServer(project_root=Path(root), host=address, port=port).start()
    print(f"serving {server.base_url}", flush=True)
    signal.sigwait(stop_signals)
    server.stop()


if __name__ == "__main__":
    main()
