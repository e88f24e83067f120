"""Hosts made of network namespaces (tools/netns_topology.sh), for tests and benchmarks.

Every process of a topology runs in its host's namespace with DDS set for a real network:
``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET`` (multicast discovery on the hosts' subnet, ROS's
default), ``FASTDDS_BUILTIN_TRANSPORTS=UDPv4`` (namespaces share /dev/shm: Fast DDS's
shared-memory transport would otherwise carry the data past the network), its own
``ROS_DOMAIN_ID``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "netns_topology.sh"


def can_make_namespaces() -> tuple[bool, str]:
    """(True, "") when this machine lets us create namespaces, else (False, why)."""
    if os.geteuid() != 0:
        return False, "network namespaces need root (CAP_NET_ADMIN); not root here"
    out = subprocess.run(["bash", str(SCRIPT), "check"], capture_output=True, text=True)
    return (out.returncode == 0), out.stderr.strip()


class Topology:
    """Args: name (<= 8 chars), host names, DDS domain id."""

    def __init__(self, name: str, hosts: list[str], domain_id: int) -> None:
        self.name, self.hosts, self.domain_id = name, list(hosts), domain_id
        out = subprocess.run(["bash", str(SCRIPT), "up", name, *hosts], capture_output=True,
                             text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"netns topology {name} not built: {out.stderr.strip()}")
        self.addresses = dict(line.split() for line in out.stdout.split("\n") if line.strip())

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ROS_", "FASTDDS_", "RMW_"))}
        env.update(ROS_DOMAIN_ID=str(self.domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET",
                   FASTDDS_BUILTIN_TRANSPORTS="UDPv4", RMW_IMPLEMENTATION="rmw_fastrtps_cpp",
                   PYTHONUNBUFFERED="1")
        return env

    def command(self, host: str, args: list[str]) -> list[str]:
        """``args`` run in ``host``'s namespace (with :meth:`env` given to Popen)."""
        return ["ip", "netns", "exec", f"{self.name}-{host}", *args]

    def cut(self, host: str) -> None:
        subprocess.run(["bash", str(SCRIPT), "cut", self.name, host], check=True, timeout=10)

    def restore(self, host: str) -> None:
        subprocess.run(["bash", str(SCRIPT), "restore", self.name, host], check=True, timeout=10)

    def down(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "down", self.name], timeout=60)


def stop_processes(procs, timeout: float = 20.0) -> None:
    """SIGINT every process still running (a node's clean shutdown), then wait for each up to
    ``timeout`` s; one that does not end is killed (and waited for, 5 s)."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
