"""The tuning database: every measured schedule, as a trace, kept in a JSON-lines file.

A record says "on this target, this workload, scheduled by this trace, ran in these seconds".
The workload is named by the structural hash of the *unscheduled* PrimFunc, so the same
function written again (other variable names, another file) finds its records, and a second
tuning run opened on the same file starts from what the first one measured.

The file holds one JSON object per line, appended as records arrive (a crash loses at most the
line being written):

* ``{"workload": "<hash>", "source": "<TVMScript>"}`` once per workload, so that the file
  says which function each record is about;
* ``{"workload": "<hash>", "target": "llvm", "trace": [...], "run_secs": [...]}`` per record,
  with the trace as :meth:`mlckit.tir.schedule.trace.Trace.as_json` writes it and ``run_secs``
  ``null`` for a candidate that failed. A program measured again gets another such line;
  the database counts all the repeats of a program together (:func:`merge_measurements`).

A tuning *work_dir* (``ms.tune_tir(..., work_dir="./tune_tmp")``, as in TVM) keeps its database
in the file ``DATABASE_FILE`` inside it: ``JSONDatabase(work_dir="./tune_tmp")`` opens it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlckit.errors import MLCError
from mlckit.ir.module import IRModule
from mlckit.ir.structural import structural_hash
from mlckit.relax.transform.meta_schedule import register_work_dir_database
from mlckit.script import from_source
from mlckit.target import Target
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule import Schedule
from mlckit.tir.schedule.trace import Trace

from .measure import TuneError, median_secs, the_prim_func

# The database's file in a work_dir (TVM keeps two there, workloads and records; this one
# file holds both).
DATABASE_FILE = "database.json"


def workload_hash(func_or_mod: PrimFunc | IRModule) -> str:
    """The key of a workload: the structural hash of its PrimFunc (as ``{"main": func}``), in
    hex."""
    func = the_prim_func(func_or_mod)
    return f"{structural_hash(IRModule({'main': func})) & (2**64 - 1):016x}"


@dataclass
class TuningRecord:
    """One measured schedule of a workload on a target."""

    trace: list[dict[str, Any]]
    run_secs: list[float] | None
    workload_hash: str
    target: str

    def median_secs(self) -> float:
        """Seconds per run (the median of the repeats); infinity for a failed candidate."""
        return median_secs(self.run_secs)

    def program_key(self) -> str:
        """The same for every measurement of one program (workload, target and trace)."""
        return json.dumps([self.workload_hash, self.target, self.trace], sort_keys=True)

    def as_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload_hash,
            "target": self.target,
            "trace": self.trace,
            "run_secs": self.run_secs,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> TuningRecord:
        return TuningRecord(data["trace"], data["run_secs"], data["workload"], data["target"])


def merge_measurements(records: Sequence[TuningRecord]) -> list[TuningRecord]:
    """One record per program (workload, target and trace): a program measured again (see
    ``tune_tir``'s ``remeasure_top_k``) counts with all its repeats, in first-seen order. A
    failed measurement is dropped where another one of the program succeeded."""
    merged: dict[str, TuningRecord] = {}
    for record in records:
        key = record.program_key()
        seen = merged.get(key)
        if seen is None:
            merged[key] = record
        elif record.run_secs:
            run_secs = [*(seen.run_secs or []), *record.run_secs]
            merged[key] = TuningRecord(seen.trace, run_secs, seen.workload_hash, seen.target)
    return list(merged.values())


class JSONDatabase:
    """Tuning records in memory, and in the JSON-lines file ``path`` (or the work_dir's
    ``DATABASE_FILE``) when one is given: read when the database is opened, appended to by
    every commit."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        work_dir: str | os.PathLike[str] | None = None,
    ):
        if work_dir is not None:
            if path is not None:
                raise TuneError(
                    f"JSONDatabase: give a file (path={str(path)!r}) or a folder "
                    f"(work_dir={str(work_dir)!r}), not both"
                )
            if Path(work_dir).exists() and not Path(work_dir).is_dir():
                raise TuneError(
                    f"work_dir {str(work_dir)!r} is a file; a work_dir is the folder that "
                    f"keeps the tuning database ({DATABASE_FILE}), made if missing"
                )
            path = Path(work_dir) / DATABASE_FILE
        self.path = None if path is None else Path(path)
        self._records: list[TuningRecord] = []
        self._workloads: dict[str, str] = {}
        if self.path is not None and self.path.exists():
            self._read(self.path)

    def _read(self, path: Path) -> None:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                    if "source" in data:
                        self._workloads[data["workload"]] = data["source"]
                    else:
                        self._records.append(TuningRecord.from_json(data))
                except (ValueError, KeyError, TypeError) as err:
                    raise MLCError(
                        f"{path}:{number}: not a tuning record ({type(err).__name__}: {err}); "
                        "a tuning database file holds one JSON object per line"
                    ) from None

    def _append(self, data: dict[str, Any]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(data) + "\n")

    # ------------------------------------------------------------------ writing
    def commit_workload(self, func_or_mod: PrimFunc | IRModule) -> str:
        """Store the unscheduled function's TVMScript (once); returns its workload hash."""
        key = workload_hash(func_or_mod)
        if key not in self._workloads:
            source = the_prim_func(func_or_mod).script()
            self._workloads[key] = source
            self._append({"workload": key, "source": source})
        return key

    def commit_tuning_record(self, record: TuningRecord) -> None:
        self._records.append(record)
        self._append(record.as_json())

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._records)

    def has_workload(self, func_or_mod: PrimFunc | IRModule) -> bool:
        return workload_hash(func_or_mod) in self._workloads

    def get_workload(self, key: str) -> PrimFunc | None:
        """The unscheduled function stored under the workload hash ``key``."""
        source = self._workloads.get(key)
        return None if source is None else the_prim_func(from_source(source))

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return list(self._records)

    def get_top_k(
        self, func_or_mod: PrimFunc | IRModule, target: Any, k: int
    ) -> list[TuningRecord]:
        """The ``k`` fastest programs of this workload on ``target``, fastest first (failed
        candidates are left out; a program measured more than once is one record with all its
        repeats)."""
        key, wanted = workload_hash(func_or_mod), Target(target)
        found = [
            r
            for r in merge_measurements(self._records)
            if r.workload_hash == key and r.run_secs and Target(r.target) == wanted
        ]
        return sorted(found, key=TuningRecord.median_secs)[:k]

    def query_schedule(self, func_or_mod: PrimFunc | IRModule, target: Any) -> Schedule | None:
        """The best record's trace replayed on a fresh schedule of the function; ``None`` when
        the workload has no successful record for ``target``."""
        best = self.get_top_k(func_or_mod, target, 1)
        if not best:
            return None
        sch = Schedule(the_prim_func(func_or_mod))
        Trace.from_json(best[0].trace).apply_to_schedule(sch)
        return sch

    def __repr__(self) -> str:
        where = self.path or "memory"
        return f"<JSONDatabase {where}: {len(self._workloads)} workloads, {len(self)} records>"


def database_in_work_dir(work_dir: str | os.PathLike[str]) -> JSONDatabase:
    """The database that tuning kept in ``work_dir``; a TuneError when it holds none (a
    mistyped folder would otherwise apply no schedule, silently)."""
    if not (Path(work_dir) / DATABASE_FILE).is_file():
        raise TuneError(
            f"work_dir {str(work_dir)!r} holds no tuning database ({DATABASE_FILE}); tune "
            "into it first (ms.tune_tir or ms.relax_integration.tune_relax with work_dir=...)"
        )
    return JSONDatabase(work_dir=work_dir)


register_work_dir_database(database_in_work_dir)

__all__ = [
    "DATABASE_FILE",
    "JSONDatabase",
    "TuningRecord",
    "database_in_work_dir",
    "merge_measurements",
    "workload_hash",
]
