"""``tir.TensorIntrin``: a hardware instruction described in TensorIR, for ``sch.tensorize``.

An intrinsic is a pair of PrimFuncs over corresponding buffers (the i-th parameter of one
matches the i-th of the other):

* ``desc`` says what the instruction computes, as the loop nest a block would hold: for a
  16x16x16 matrix unit, ``C[i, j] = C[i, j] + A[i, k] * B[j, k]`` over ``T.grid(16, 16, 16)``,
  its buffers ``(16, 16)`` views in the unit's memories (``scope="global.A_reg"``);
* ``impl`` says how to run it: usually one call to the instruction
  (``T.call_extern("tmm16", C.access_ptr("w"), ...)``), but any body works.

Register the pair under a name once (``TensorIntrin.register("tmm16", desc, impl)``), then
``sch.tensorize(block, "tmm16")`` checks that the block computes what ``desc`` does, up to the
names of variables and buffers, and replaces the block's body with ``impl``'s, whose buffers
then view the regions of the block's buffers that ``desc``'s stood for.
"""

from __future__ import annotations

from mlckit.errors import IRError, ScheduleError

from .analysis import expr_deep_equal
from .buffer import Buffer
from .function import PrimFunc


class TensorIntrin:
    """An intrinsic: what it computes (``desc``) and how it runs (``impl``)."""

    _registry: dict[str, TensorIntrin] = {}

    def __init__(self, desc: PrimFunc, impl: PrimFunc):
        for role, func in (("desc", desc), ("impl", impl)):
            if not isinstance(func, PrimFunc):
                raise IRError(
                    f"TensorIntrin: {role} must be a PrimFunc (@T.prim_func), "
                    f"not {type(func).__name__}"
                )
        desc_buffers, impl_buffers = param_buffers(desc, "desc"), param_buffers(impl, "impl")
        if len(desc_buffers) != len(impl_buffers):
            raise IRError(
                f"TensorIntrin: desc has {len(desc_buffers)} buffer parameters and impl "
                f"{len(impl_buffers)}; each buffer of one stands for the buffer of the other "
                "at the same position"
            )
        for d, i in zip(desc_buffers, impl_buffers):
            same_shape = len(d.shape) == len(i.shape) and all(
                expr_deep_equal(a, b) for a, b in zip(d.shape, i.shape)
            )
            if d.dtype != i.dtype or not same_shape:
                raise IRError(
                    f"TensorIntrin: desc's buffer {d.name} {_describe(d)} and impl's "
                    f"buffer {i.name} {_describe(i)} are at the same position but differ"
                )
        self.desc, self.impl = desc, impl

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> None:
        """Register the intrinsic ``(desc, impl)`` as ``name``; a name already taken needs
        ``override=True``."""
        if name in TensorIntrin._registry and not override:
            raise ScheduleError(
                f"TensorIntrin.register: an intrinsic named {name!r} is registered already; "
                "pass override=True to replace it"
            )
        TensorIntrin._registry[name] = TensorIntrin(desc, impl)

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> TensorIntrin | None:
        """The intrinsic registered as ``name`` (None if there is none and ``allow_missing``)."""
        intrin = TensorIntrin._registry.get(name)
        if intrin is None and not allow_missing:
            known = ", ".join(sorted(TensorIntrin._registry)) or "none yet"
            raise ScheduleError(
                f"no tensor intrinsic named {name!r}; registered: {known} "
                "(tir.TensorIntrin.register(name, desc, impl) adds one)"
            )
        return intrin

    def __repr__(self) -> str:
        return f"TensorIntrin(desc={self.desc.attrs.get('global_symbol', 'desc')!r})"


def param_buffers(func: PrimFunc, role: str) -> list[Buffer]:
    """The buffers of ``func``'s parameters, in order; every parameter must have one."""
    buffers = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            raise IRError(
                f"TensorIntrin: parameter {param.name_hint} of {role} is not a buffer; give "
                "each parameter one (T.match_buffer, or a T.Buffer annotation)"
            )
        buffers.append(buffer)
    return buffers


def _describe(buffer: Buffer) -> str:
    return f"({', '.join(d.script() for d in buffer.shape)}) {buffer.dtype}"
