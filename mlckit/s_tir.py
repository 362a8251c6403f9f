"""Newer TVM spelling: ``tvm.s_tir.Schedule`` is ``tvm.tir.Schedule`` (with ``get_sblock``), and
``tvm.s_tir.transform`` holds the schedule passes (``s_tir.transform.DefaultGPUSchedule()``)."""

from mlckit.tir import transform
from mlckit.tir.schedule import BlockRV, LoopRV, Schedule

SBlockRV = BlockRV

__all__ = ["BlockRV", "LoopRV", "SBlockRV", "Schedule", "transform"]
