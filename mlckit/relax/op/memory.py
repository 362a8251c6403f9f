"""Explicit memory: ``relax.op.builtin.alloc_tensor`` and ``relax.op.memory.*``.

Before these ops a relax program never says where a tensor lives: ``R.call_tir`` allocates its
outputs implicitly. Lowering makes that visible in two steps, as in TVM:

* ``CallTIRRewrite`` turns each output of a ``call_tir`` into
  ``R.builtin.alloc_tensor(shape, dtype, runtime_device_index)``: one fresh tensor each;
* ``StaticPlanBlockMemory`` replaces the static-shaped ones by views of reusable byte buffers:
  ``storage = R.memory.alloc_storage(R.shape([nbytes]), device, scope, dtype)`` and
  ``R.memory.alloc_tensor(storage, offset, shape, dtype)``; ``R.memory.kill_storage`` and
  ``R.memory.kill_tensor`` end a lifetime early.

Purity follows TVM: allocating has no visible effect (the allocation ops are pure, so they may
appear wherever a value is computed), while the kill ops are impure so that dead-code removal
keeps them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from mlckit.errors import StructInfoError
from mlckit.ir.dtype import check_dtype

from ..expr import Call, DataTypeImm, Expr, PrimValue, ShapeExpr, StringImm
from ..struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from ..utils import format_struct_info
from ._registry import arg_label, fail, make_call, register


# ------------------------------------------------------------------------------ argument checks
def _shape(call: Call, index: int) -> Expr:
    arg = call.args[index]
    if not isinstance(arg.struct_info_, ShapeStructInfo):
        raise fail(
            call,
            f"argument {index} must be a shape such as R.shape([n, 256]), but "
            f"{arg_label(call, index)} is {format_struct_info(arg.struct_info_)}",
        )
    return arg


def _dtype(call: Call, index: int) -> str:
    arg = call.args[index]
    if not isinstance(arg, DataTypeImm):
        raise fail(
            call,
            f'argument {index} must be a data type such as R.dtype("float32"), got '
            f"{arg_label(call, index)}",
        )
    return arg.value


def _int_value(call: Call, index: int, what: str) -> None:
    arg = call.args[index]
    sinfo = arg.struct_info_
    if not (isinstance(sinfo, PrimStructInfo) and sinfo.dtype.startswith(("int", "uint"))):
        raise fail(
            call,
            f"the {what} (argument {index}) must be an integer such as R.prim_value(0), but "
            f"{arg_label(call, index)} is {format_struct_info(sinfo)}",
        )


def _string(call: Call, index: int, what: str) -> None:
    if not isinstance(call.args[index], StringImm):
        raise fail(
            call,
            f'the {what} (argument {index}) must be a string such as R.str("global"), got '
            f"{arg_label(call, index)}",
        )


# ------------------------------------------------------------------------------ inference
def _infer_builtin_alloc_tensor(call: Call, ctx: Any) -> StructInfo:
    shape = _shape(call, 0)
    dtype = _dtype(call, 1)
    _int_value(call, 2, "runtime device index")
    _string(call, 3, "storage scope")
    return TensorStructInfo(shape, dtype)


def _infer_alloc_storage(call: Call, ctx: Any) -> StructInfo:
    size = _shape(call, 0).struct_info_
    if size.ndim not in (-1, 1):  # type: ignore[attr-defined]
        raise fail(
            call,
            f"the size is a 1-d shape holding the number of bytes, R.shape([4096]), got "
            f"{format_struct_info(size)}",
        )
    _int_value(call, 1, "virtual device index")
    _string(call, 2, "storage scope")
    _dtype(call, 3)
    # A storage is an untyped block of bytes: only the runtime knows more about it.
    return ObjectStructInfo()


def _infer_memory_alloc_tensor(call: Call, ctx: Any) -> StructInfo:
    storage = call.args[0].struct_info_
    if isinstance(storage, (TensorStructInfo, ShapeStructInfo, PrimStructInfo, TupleStructInfo)):
        raise fail(
            call,
            "the first argument must be a storage made by R.memory.alloc_storage, but "
            f"{arg_label(call, 0)} is {format_struct_info(storage)}",
        )
    _int_value(call, 1, "offset in bytes")
    return TensorStructInfo(_shape(call, 2), _dtype(call, 3))


def _infer_kill(call: Call, ctx: Any) -> StructInfo:
    return TupleStructInfo([])


register(
    "relax.builtin.alloc_tensor",
    _infer_builtin_alloc_tensor,
    ("shape", "dtype", "runtime_device_index", "storage_scope"),
)
register(
    "relax.memory.alloc_storage",
    _infer_alloc_storage,
    ("size", "virtual_device_index", "storage_scope", "dtype"),
)
register(
    "relax.memory.alloc_tensor",
    _infer_memory_alloc_tensor,
    ("storage", "offset", "shape", "dtype"),
)
register("relax.memory.kill_storage", _infer_kill, ("storage",), purity=False)
register("relax.memory.kill_tensor", _infer_kill, ("tensor",), purity=False)


# ------------------------------------------------------------------------------ constructors
def _as_shape(value: Any, op: str) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (list, tuple)):
        return ShapeExpr(list(value))
    raise StructInfoError(
        f"{op}: the shape must be a list of dims or R.shape([...]), got {value!r}"
    )


def _as_dtype(value: Any, op: str) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return DataTypeImm(check_dtype(value))
    raise StructInfoError(f'{op}: the dtype must be a string such as "float32", got {value!r}')


def _as_int(value: Any, op: str) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return PrimValue(value)
    raise StructInfoError(f"{op}: expected an integer, got {value!r}")


def _as_str(value: Any, op: str) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return StringImm(value)
    raise StructInfoError(f"{op}: the storage scope must be a string, got {value!r}")


def _builtin_alloc_tensor(
    shape: Any, dtype: Any, runtime_device_index: Any, storage_scope: Any = "global"
) -> Call:
    """``R.builtin.alloc_tensor(R.shape([n, 256]), R.dtype("float32"), R.prim_value(0))``: a
    fresh tensor of that shape and dtype on device ``runtime_device_index`` (what
    CallTIRRewrite gives each output of a ``call_tir``)."""
    op = "relax.builtin.alloc_tensor"
    return make_call(
        op,
        [
            _as_shape(shape, op),
            _as_dtype(dtype, op),
            _as_int(runtime_device_index, op),
            _as_str(storage_scope, op),
        ],
    )


def alloc_storage(
    size: Any, virtual_device_index: Any, storage_scope: Any = "global", dtype: Any = "float32"
) -> Call:
    """``R.memory.alloc_storage(R.shape([nbytes]), R.prim_value(0), R.str("global"),
    R.dtype("float32"))``: a block of ``nbytes`` bytes that tensors are placed in."""
    op = "relax.memory.alloc_storage"
    return make_call(
        op,
        [
            _as_shape(size, op),
            _as_int(virtual_device_index, op),
            _as_str(storage_scope, op),
            _as_dtype(dtype, op),
        ],
    )


def alloc_tensor(storage: Expr, offset: Any, shape: Any, dtype: Any) -> Call:
    """``R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([16, 64]), R.dtype("float32"))``:
    a tensor that lives in ``storage`` starting ``offset`` bytes in."""
    op = "relax.memory.alloc_tensor"
    return make_call(op, [storage, _as_int(offset, op), _as_shape(shape, op), _as_dtype(dtype, op)])


def kill_storage(storage: Expr) -> Call:
    """``R.memory.kill_storage(storage)``: the storage is no longer used (it may be freed)."""
    return make_call("relax.memory.kill_storage", [storage])


def kill_tensor(tensor: Expr) -> Call:
    """``R.memory.kill_tensor(tensor)``: the tensor is no longer used."""
    return make_call("relax.memory.kill_tensor", [tensor])


# TVM keeps the one builtin allocation in its own namespace, ``relax.op.builtin``; this object
# is that namespace (``relax.op.builtin.alloc_tensor``, printed ``R.builtin.alloc_tensor``).
builtin = SimpleNamespace(alloc_tensor=_builtin_alloc_tensor)

__all__ = ["alloc_storage", "alloc_tensor", "builtin", "kill_storage", "kill_tensor"]
