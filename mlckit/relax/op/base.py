"""Calls that leave the graph: ``call_tir`` (a TensorIR function in the module),
``call_dps_packed`` / ``call_pure_packed`` / ``call_packed`` (functions of the runtime registry).

``call_tir`` and ``call_dps_packed`` use destination passing: the callee receives the inputs
*and* freshly allocated outputs, whose struct info the caller states as ``out_sinfo``; they are
pure (allowed in dataflow blocks) because the callee may only write its outputs.
The call's ``sinfo_args`` holds the output struct infos, one per output, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit.errors import StructInfoError
from mlckit.ir.module import GlobalVar
from mlckit.tir.expr import PrimExpr
from mlckit.tir.function import PrimFunc

from ..expr import Call, Expr, ExternFunc, ShapeExpr, Tuple, convert_to_expr
from ..struct_info import (
    ObjectStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from ..utils import format_struct_info
from ._registry import fail, make_call, register

OutSinfo = TensorStructInfo | Sequence[TensorStructInfo]


def _out_sinfo_list(op: str, out_sinfo: Any, dtype: str | None) -> list[TensorStructInfo]:
    """``out_sinfo`` as a list of TensorStructInfo, accepting TVM's older ``(shape, dtype=)``."""
    hint = (
        'out_sinfo must be a relax.TensorStructInfo such as R.Tensor((n, 256), "float32"), '
        "or a list of them (one per output)"
    )
    if isinstance(out_sinfo, TupleStructInfo):
        out_sinfo = list(out_sinfo.fields)
    if isinstance(out_sinfo, StructInfo):
        out_sinfo = [out_sinfo]
    if isinstance(out_sinfo, ShapeExpr) or _is_shape_like(out_sinfo):
        # The pre-struct-info spelling R.call_tir(f, args, (1, 128), dtype="float32").
        if dtype is None:
            raise StructInfoError(
                f"{op}: an output shape {out_sinfo!r} was given without dtype=...; {hint}"
            )
        return [TensorStructInfo(out_sinfo, dtype)]
    if not isinstance(out_sinfo, (list, tuple)) or not out_sinfo:
        raise StructInfoError(f"{op}: {hint}, got {out_sinfo!r}")
    for s in out_sinfo:
        if not isinstance(s, TensorStructInfo):
            shown = format_struct_info(s) if isinstance(s, StructInfo) else repr(s)
            raise StructInfoError(f"{op}: {hint}; every output is a tensor, got {shown}")
    return list(out_sinfo)


def _is_shape_like(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(v, PrimExpr) or (isinstance(v, int) and not isinstance(v, bool)) for v in value
    )


def _as_arg_tuple(args: Any) -> Expr:
    """Arguments are passed as one relax Tuple; a single tensor becomes a 1-tuple."""
    if isinstance(args, (list, tuple)):
        return Tuple(list(args))
    expr = convert_to_expr(args)
    if isinstance(expr, Tuple) or isinstance(expr.struct_info_, TupleStructInfo):
        return expr
    return Tuple([expr])


def _dps_result(call: Call) -> StructInfo:
    outs = call.sinfo_args
    if not outs or not all(isinstance(s, TensorStructInfo) for s in outs):
        shown = ", ".join(format_struct_info(s) for s in outs) or "nothing"
        raise fail(call, "out_sinfo must be one relax.TensorStructInfo per output, got " + shown)
    args_sinfo = call.args[1].struct_info_ if len(call.args) > 1 else None
    if not isinstance(args_sinfo, TupleStructInfo):
        raise fail(
            call, f"the arguments must be a tuple of tensors, got {format_struct_info(args_sinfo)}"
        )
    return outs[0] if len(outs) == 1 else TupleStructInfo(outs)


def _infer_call_tir(call: Call, ctx: Any) -> StructInfo:
    callee = call.args[0]
    if not isinstance(callee, GlobalVar):
        raise fail(
            call,
            f"the callee must be a TensorIR function of the module (a GlobalVar "
            f"such as cls.linear), got {type(callee).__name__}; use "
            "relax.call_dps_packed for a registered function",
        )
    result = _dps_result(call)
    mod = getattr(ctx, "context_mod", None)
    if mod is not None and callee.name_hint in mod:
        func = mod[callee.name_hint]
        n_in = len(call.args[1].struct_info_.fields)  # type: ignore[union-attr]
        n_out = len(call.sinfo_args)
        n_vars = len(call.args[2].values) if len(call.args) > 2 else 0  # type: ignore[attr-defined]
        if isinstance(func, PrimFunc) and len(func.params) != n_in + n_out + n_vars:
            extra = f" + {n_vars} tir_vars" if n_vars else ""
            raise fail(
                call,
                (
                    f"{callee.name_hint} takes {len(func.params)} parameters, but the call passes "
                    f"{n_in} inputs + {n_out} outputs{extra} = {n_in + n_out + n_vars}"
                ),
            )
    return result


def _infer_call_dps_packed(call: Call, ctx: Any) -> StructInfo:
    return _dps_result(call)


def _infer_call_pure_packed(call: Call, ctx: Any) -> StructInfo:
    outs = call.sinfo_args
    if not outs:
        return ObjectStructInfo()
    return outs[0] if len(outs) == 1 else TupleStructInfo(outs)


register("relax.call_tir", _infer_call_tir, ("gvar", "args", "tir_vars"), num_inputs=-1)
register("relax.call_dps_packed", _infer_call_dps_packed, ("func", "args"))
register("relax.call_pure_packed", _infer_call_pure_packed, ("func",), num_inputs=-1)


def _extern(func: Any, op: str) -> Expr:
    if isinstance(func, str):
        return ExternFunc(func)
    if isinstance(func, ExternFunc):
        return func
    raise StructInfoError(
        f"{op}: the callee must be a function name (str) or relax.ExternFunc, "
        f"got {type(func).__name__}"
    )


def call_tir(
    gvar: GlobalVar | str | ExternFunc,
    args: Any,
    out_sinfo: OutSinfo | Any,
    tir_vars: ShapeExpr | Sequence[Any] | None = None,
    *,
    dtype: str | None = None,
) -> Call:
    """``R.call_tir(cls.f, (x, w), out_sinfo=R.Tensor(...))``: call a TensorIR function.

    ``out_sinfo`` is one TensorStructInfo or a list (several outputs: the call returns a
    tuple). ``tir_vars`` passes symbolic values as extra scalar arguments. The older
    ``call_tir(f, args, (1, 128), dtype="float32")`` and a string callee (a registered
    function: ``call_dps_packed``) are accepted too.
    """
    if isinstance(gvar, (str, ExternFunc)):
        return call_dps_packed(gvar, args, out_sinfo, dtype=dtype)
    if not isinstance(gvar, GlobalVar):
        raise StructInfoError(
            f"relax.call_tir: the callee must be a GlobalVar of the module "
            f"(e.g. cls.linear or bb.add_func(...)), got {type(gvar).__name__}"
        )
    outs = _out_sinfo_list("relax.call_tir", out_sinfo, dtype)
    call_args: list[Any] = [gvar, _as_arg_tuple(args)]
    if tir_vars is not None:
        call_args.append(tir_vars if isinstance(tir_vars, ShapeExpr) else ShapeExpr(tir_vars))
    return make_call("relax.call_tir", call_args, sinfo_args=outs)


def call_dps_packed(
    func: str | Expr, args: Any, out_sinfo: OutSinfo | Any, *, dtype: str | None = None
) -> Call:
    """``R.call_dps_packed("env.linear", (x, w), out_sinfo=...)``: destination-passing call of a
    function from the runtime registry (``mlckit.register_func``)."""
    outs = _out_sinfo_list("relax.call_dps_packed", out_sinfo, dtype)
    return make_call(
        "relax.call_dps_packed",
        [_extern(func, "relax.call_dps_packed"), _as_arg_tuple(args)],
        sinfo_args=outs,
    )


def _sinfo_list(sinfo_args: Any, op: str) -> list[StructInfo]:
    if sinfo_args is None:
        return []
    if isinstance(sinfo_args, StructInfo):
        return [sinfo_args]
    items = list(sinfo_args)
    for s in items:
        if not isinstance(s, StructInfo):
            raise StructInfoError(
                f"{op}: sinfo_args must be struct infos such as "
                f'R.Tensor((3,), "float32"), got {s!r}'
            )
    return items


def call_pure_packed(
    func: str | Expr, *args: Any, sinfo_args: StructInfo | Sequence[StructInfo]
) -> Call:
    """``R.call_pure_packed("env.f", x, sinfo_args=R.Tensor(...))``: call a registered function
    that returns its result (not destination passing) and promises to have no side effect."""
    sinfos = _sinfo_list(sinfo_args, "relax.call_pure_packed")
    return make_call(
        "relax.call_pure_packed",
        [_extern(func, "relax.call_pure_packed"), *args],
        sinfo_args=sinfos,
    )


def call_packed(
    func: str | Expr, *args: Any, sinfo_args: StructInfo | Sequence[StructInfo] | None = None
) -> Call:
    """``R.call_packed("env.f", x, sinfo_args=...)``: call a registered function that may have
    side effects (so it is not allowed in a dataflow block)."""
    sinfos = _sinfo_list(sinfo_args, "relax.call_packed")
    return Call(_extern(func, "relax.call_packed"), list(args), sinfo_args=sinfos)


__all__ = ["call_dps_packed", "call_packed", "call_pure_packed", "call_tir"]
