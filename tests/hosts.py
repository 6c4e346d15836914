"""Several hosts on one machine, for tests of a deployment over more than one host.

    with hosts_network(service=["db", "web", "worker"], upstream=["worker", "git"]) as network:
        network.mode                      # "namespaces", or "loopback" (network.fallback_reason says why)
        db = network.hosts["db"]
        db.address                        # 10.N.0.x (namespaces) or 127.0.0.x (loopback)
        db.port(5432)                     # 5432 in its own namespace; a free port of 127.0.0.x otherwise
        db.start(["redis-server", ...], environment={...}, log_path=...)   # a process on that host
        network.client_address            # this test process's address on the service network

**namespaces** (root, iproute2): each host is a network namespace of its own with its loopback up.
A switch namespace holds two bridges: the *service* network 10.N.0.0/24, which the hosts in
`service` and this process (10.N.0.1, through one veth pair: the only change to the machine's
own namespace) are on, and the *upstream* network 10.N.1.0/24 of the hosts in `upstream`. A host
only on the upstream network (a git server) is unreachable from the service-only hosts and from
this process, as a git host is from web hosts without egress. Bridges in a namespace of their own
see none of the machine's firewall rules. Leaving the block deletes every namespace, and with
them every interface made (stop the hosts' processes first: a namespace lives while a process
does).

**loopback**, where a namespace cannot be made (not root, no CAP_SYS_ADMIN, no iproute2), or when
the environment says TEST_HOSTS_NETWORK=loopback (to run this mode where namespaces work): the
hosts are processes of this machine on addresses 127.0.0.2, .3, ...; they share the machine's
network, so every host reaches every other, upstream included.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE_NETWORK = 0  # third octet of each network: 10.N.0.0/24 and 10.N.1.0/24
UPSTREAM_NETWORK = 1
CLIENT_HOST_NUMBER = 1


@dataclass(frozen=True)
class Host:
    name: str
    address: str  # where the other hosts reach it
    namespace: str | None  # None: a process of this machine (loopback mode)

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run on this host."""
        return ["ip", "netns", "exec", self.namespace, *argv] if self.namespace else argv

    def port(self, default: int) -> int:
        """The port a server of this host listens on: `default` in a namespace of its own, else a
        port of this address that nothing listens on now."""
        if self.namespace:
            return default
        with socket.socket() as probe:
            probe.bind((self.address, 0))
            return probe.getsockname()[1]

    def start(self, argv: list[str], *, environment: dict[str, str], log_path: Path) -> subprocess.Popen:
        """`argv` on this host in a process group of its own (`ip netns exec` execs it: the pid
        is the program's), output to `log_path`, from the project's directory."""
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                self.command(argv),
                cwd=ROOT,
                env={**os.environ, **environment},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def run(self, argv: list[str], *, environment: dict[str, str], timeout: float = 300) -> str:
        """`argv` on this host to its end; its standard output (its error output in the failure)."""
        completed = subprocess.run(
            self.command(argv),
            cwd=ROOT,
            env={**os.environ, **environment},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed on host {self.name}:\n{completed.stderr}")
        return completed.stdout


@dataclass
class HostsNetwork:
    mode: str
    client_address: str
    hosts: dict[str, Host]
    fallback_reason: str = ""
    subnets: list[str] = field(default_factory=list)  # what GIT_ALLOW_PRIVATE_HOSTS must name


def _ip(*arguments: str) -> None:
    completed = subprocess.run(["ip", *arguments], capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"ip {' '.join(arguments)}: {completed.stderr.strip()}")


def _namespaces_unavailable(probe: str) -> str:
    """Why the network cannot be made of namespaces here ('' when it can): tries, in a namespace
    `probe` deleted again, what the network needs (a bridge and a veth pair; a container may allow
    namespaces without the kernel's bridge module)."""
    if os.environ.get("TEST_HOSTS_NETWORK") == "loopback":
        return "TEST_HOSTS_NETWORK=loopback"
    if os.geteuid() != 0:
        return "not running as root"
    try:
        _ip("netns", "add", probe)
    except FileNotFoundError:
        return "iproute2 (the ip command) is not installed"
    except RuntimeError as exc:
        return str(exc)
    try:
        _ip("-n", probe, "link", "add", "probe", "type", "bridge")
        _ip("-n", probe, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
    except RuntimeError as exc:
        return str(exc)
    finally:
        _ip("netns", "del", probe)
    return ""


def _unused_second_octet() -> int:
    """N such that nothing on this machine already routes or holds an address in 10.N.0.0/16."""
    taken = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    taken += subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    candidates = [octet for octet in range(64, 255) if f"10.{octet}." not in taken]
    return random.choice(candidates)


@contextmanager
def hosts_network(*, service: list[str], upstream: list[str]) -> Iterator[HostsNetwork]:
    names = list(dict.fromkeys([*service, *upstream]))
    prefix = f"mh{uuid.uuid4().hex[:5]}"
    reason = _namespaces_unavailable(f"{prefix}-probe")
    if reason:
        hosts = {name: Host(name, f"127.0.0.{number}", None) for number, name in enumerate(names, start=2)}
        yield HostsNetwork(
            mode="loopback", client_address="127.0.0.1", hosts=hosts, fallback_reason=reason, subnets=["127.0.0.0/8"]
        )
        return
    octet = _unused_second_octet()
    switch = f"{prefix}-switch"
    made: list[str] = []
    try:
        _ip("netns", "add", switch)
        made.append(switch)
        bridges = {SERVICE_NETWORK: "service", UPSTREAM_NETWORK: "upstream"}
        for bridge in bridges.values():
            _ip("-n", switch, "link", "add", bridge, "type", "bridge")
            _ip("-n", switch, "link", "set", bridge, "up")
        # This process's end of the service network: the one interface of the machine's namespace.
        _ip("link", "add", f"{prefix}c", "type", "veth", "peer", "name", "client", "netns", switch)
        _ip("-n", switch, "link", "set", "client", "master", bridges[SERVICE_NETWORK], "up")
        client_address = f"10.{octet}.{SERVICE_NETWORK}.{CLIENT_HOST_NUMBER}"
        _ip("addr", "add", f"{client_address}/24", "dev", f"{prefix}c")
        _ip("link", "set", f"{prefix}c", "up")
        hosts = {}
        for number, name in enumerate(names, start=CLIENT_HOST_NUMBER + 1):
            namespace = f"{prefix}-{name}"
            _ip("netns", "add", namespace)
            made.append(namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
            addresses = {}
            for network in (SERVICE_NETWORK, UPSTREAM_NETWORK):
                if name not in (service if network == SERVICE_NETWORK else upstream):
                    continue
                port_name = f"h{number}n{network}"
                _ip(
                    "link",
                    "add",
                    "eth" + str(network),
                    "netns",
                    namespace,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    port_name,
                    "netns",
                    switch,
                )
                _ip("-n", switch, "link", "set", port_name, "master", bridges[network], "up")
                addresses[network] = f"10.{octet}.{network}.{number}"
                _ip("-n", namespace, "addr", "add", f"{addresses[network]}/24", "dev", f"eth{network}")
                _ip("-n", namespace, "link", "set", f"eth{network}", "up")
            hosts[name] = Host(name, addresses.get(SERVICE_NETWORK) or addresses[UPSTREAM_NETWORK], namespace)
        yield HostsNetwork(
            mode="namespaces",
            client_address=client_address,
            hosts=hosts,
            subnets=[f"10.{octet}.{network}.0/24" for network in bridges],
        )
    finally:
        # Deleting the switch deletes the peers of every veth pair, and with them their other ends.
        for namespace in reversed(made):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
