"""Newer TVM spelling: ``tvm.s_tir.Schedule`` is ``tvm.tir.Schedule`` (with ``get_sblock``)."""

from mlckit.tir.schedule import BlockRV, LoopRV, Schedule

SBlockRV = BlockRV

__all__ = ["BlockRV", "LoopRV", "SBlockRV", "Schedule"]
