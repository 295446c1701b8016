"""One Slurm task of the lab's training job (run by `srun`, inside a lab node).

Slurm says which rank this task is (SLURM_PROCID, with SLURM_LOCALID and SLURM_NODEID); the
table from lab/slurm.py says what that rank runs. The task keeps Slurm's environment, adds the
rank's (RANK = SLURM_PROCID, as a torch job under srun sets it), joins its memory cgroup when
the scenario has one, and becomes the rank through the node's shell start-up file, writing
its own log as every lab rank does. stdin is srun's; stdout/stderr go to the rank's log.
"""

from __future__ import annotations

import json
import os
import sys


def main(table_path: str) -> None:
    with open(table_path) as handle:
        table = json.load(handle)
    rank = os.environ["SLURM_PROCID"]
    spec = table[rank]
    env = {**os.environ, **spec["base_env"], **spec["env"]}
    env["RANK"] = rank
    env["LOCAL_RANK"] = os.environ.get("SLURM_LOCALID", spec["env"]["LOCAL_RANK"])
    env["HANGDESK_LAB_HOLDER_SOCKET"] = spec["holder_socket"]
    if spec.get("cgroup"):
        with open(os.path.join(spec["cgroup"], "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))
    log = os.open(f"/var/log/train/rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(spec["workdir"])
    argv = ["bash", "-c", '. /root/.bashrc; exec "$@"', "rank", *spec["argv"]]
    os.execvpe("bash", argv, env)  # noqa: S606 -- the lab's own argv, no shell string


if __name__ == "__main__":
    main(sys.argv[1])
