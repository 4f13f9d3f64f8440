"""Where a sweep's rounds run when one machine is not enough: jobs on several identical machines through
submitit (Slurm; its local executor runs the same jobs as processes on this machine, for tests).

Each job is one round, measured whole on one machine in the round's own order
(:func:`gnnbench.measure.sweep.rounds.run_round`), so every pair (a configuration and the baseline of its round) is
measured on one machine. Result files go to the sweep's folder, which the machines share (a cluster's shared
file system). Results carry the machine's hardware class (:func:`gnnbench.env.hardware_class`): rounds from
identical machines are one sweep, rounds from another class are refused by ``compare`` and ``report``, as
results from two machines always are. Without an executor a sweep runs its rounds here, one after another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["EXECUTORS", "RoundExecutor"]

EXECUTORS = ("local", "slurm")  # submitit's clusters: "local" runs the jobs as processes on this machine


@dataclass
class RoundExecutor:
    """Runs a batch of rounds at once, one submitit job per round.

    Args:
        kind: ``"slurm"`` (a Slurm cluster: ``sbatch`` must be on the PATH) or ``"local"`` (processes here).
        folder: Where submitit keeps the jobs' logs and pickles (beside the sweep).
        machines: Rounds at once (jobs in flight), at least 1.
        timeout_min: A job's time limit in minutes.
        slurm: Further ``update_parameters`` options for Slurm (``slurm_partition``, ``cpus_per_task``, ...).
    """

    kind: str
    folder: str | Path
    machines: int = 2
    timeout_min: int = 240
    slurm: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ValueError(f"unknown executor {self.kind!r}; accepted: {', '.join(map(repr, EXECUTORS))}")
        if isinstance(self.machines, bool) or not isinstance(self.machines, int) or self.machines < 1:
            raise ValueError(f"machines must be an integer >= 1 (got {self.machines!r})")
        if isinstance(self.timeout_min, bool) or not isinstance(self.timeout_min, int) or self.timeout_min < 1:
            raise ValueError(f"a job's timeout must be an integer number of minutes >= 1 (got {self.timeout_min!r})")
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise ValueError(
                "running rounds on several machines needs submitit: pip install 'gnnbench[cluster]'"
            ) from None

    def _executor(self):
        import submitit

        ex = submitit.AutoExecutor(folder=str(self.folder), cluster=self.kind)
        params: dict[str, Any] = {"timeout_min": self.timeout_min, "nodes": 1, "tasks_per_node": 1}
        if self.kind == "slurm":
            params.update({"slurm_exclusive": True, **self.slurm})  # a round's timing owns its machine
        ex.update_parameters(**params)
        return ex

    def map(self, fn: Callable, jobs: Sequence[tuple]) -> list[Any]:
        """``fn(*args)`` for each ``args`` of ``jobs`` as its own job, at most :attr:`machines` at once; the
        results in order. A job that failed raises here, naming it and where its log is."""
        out: list[Any] = []
        ex = self._executor()
        for start in range(0, len(jobs), self.machines):
            submitted = [ex.submit(fn, *args) for args in jobs[start : start + self.machines]]
            for job in submitted:
                try:
                    out.append(job.result())
                except Exception as exc:  # submitit re-raises the job's error with its traceback
                    raise RuntimeError(f"round job {job.job_id} failed (logs in {self.folder}): {exc}") from exc
        return out

    def describe(self) -> dict[str, Any]:
        """What the sweep's manifest records of where its rounds ran."""
        return {
            "kind": self.kind,
            "machines": self.machines,
            "timeout_min": self.timeout_min,
            "slurm": dict(self.slurm),
            "folder": str(self.folder),
        }
