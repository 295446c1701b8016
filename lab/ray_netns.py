"""The Ray lab's network namespace: started as `unshare --net python -m lab.ray_netns`, it
brings the namespace's loopback up and then only waits, keeping the namespace alive until the
lab's teardown stops it (by pid). The namespace has no interface but `lo`, so whatever Ray
binds there (Ray 2.60's C++ servers bind the wildcard address whatever --node-ip-address
says) answers on 127.0.0.0/8 and ::1 only, and nothing in it can reach another address."""

from __future__ import annotations

import signal
import subprocess
import sys


def main() -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    print("up", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
