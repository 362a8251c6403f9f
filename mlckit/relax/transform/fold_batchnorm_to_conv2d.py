"""FoldBatchnormToConv2D: an inference batch norm after a convolution becomes part of it.

In inference a batch norm uses its moving statistics, so per output channel ``o`` it is an
affine map of the convolution's result ``z``::

    (z - mean[o]) / sqrt(var[o] + eps) * gamma[o] + beta[o]  =  z * scale[o] + shift[o]
    scale = gamma / sqrt(var + eps)        shift = beta - mean * scale

and a convolution is linear in its weight, so ``conv2d(x, W) * scale[o]`` is
``conv2d(x, W * scale[o])`` with the scale applied to the weight's output-channel axis. The
pass rewrites::

    lv = R.nn.conv2d(x, W)                                  # W: (O, I, KH, KW), a constant
    bn = R.nn.batch_norm(lv, gamma, beta, mean, var, axis=1, epsilon=eps)

into::

    scale = gamma / sqrt(var + eps);  shift = beta - mean * scale
    w = W * R.reshape(scale, (O, 1, 1, 1))
    lv = R.nn.conv2d(x, w) + R.reshape(shift, (1, O, 1, 1))
    bn = (lv, mean, var)                                    # what batch_norm returns

Everything but the convolution and the addition depends on constants only, so FoldConstant
computes it at build and each call runs ``conv2d + add``, which FuseOps fuses with the
activation that follows. With one channel, ``W = 0.5`` (a 1x1 kernel), ``gamma = 6``,
``beta = 1``, ``mean = 2``, ``var = 8``, ``eps = 1``: ``scale = 6 / 3 = 2``,
``shift = 1 - 2 * 2 = -3``, ``w = 1``; for ``x = 4`` the original computes
``conv = 2``, ``(2 - 2) / 3 * 6 + 1 = 1`` and the folded one ``4 * 1 - 3 = 1``.

A convolution with a bias (``lv = conv2d(x, W) + b``, as torch's ``Conv2d(bias=True)`` is
imported) folds the same way, its bias scaled too: the batch norm of ``z + b`` is
``z * scale + (b * scale + shift)``.

A batch norm is folded when all of these hold, and is otherwise left as it is:

=============================  ================================================================
``training=False``             training normalizes with the batch's own statistics
its data is ``conv2d(x, W)``   another producer has no weight to scale; a bias varying along
or ``conv2d(x, W) + b``, ``b`` another axis is not a per-channel shift
one value per channel
``W``, ``b`` and the four      the new weight and bias must be computable at build
statistics are constants or    (BindParams first binds a model's weights)
computed from constants only
the convolution's result (and  otherwise the convolution would run twice, once without
its sum with ``b``) has no     the batch norm
other use
a float weight, ``out_dtype``  an integer convolution cannot take a fractional scale
its own dtype
``axis`` is the output's       a batch norm over another axis is not a per-channel scale of
channel axis (``C`` of         the weight's output channels (``O`` of ``kernel_layout``)
``out_layout``)
=============================  ================================================================

TVM's default pipeline does not run this pass; mlckit's pipelines compile models for
inference, and ``relax.get_pipeline("default")`` runs it before LegalizeOps.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from mlckit.ir import transform
from mlckit.ir.dtype import is_float
from mlckit.ir.module import GlobalVar, IRModule
from mlckit.ir.op import Op

from .. import op as R
from ..analysis.analysis import remove_all_unused, used_vars
from ..expr import (
    Call,
    Constant,
    DataTypeImm,
    Expr,
    Function,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    Var,
    VarBinding,
    const,
)
from ..expr_functor import ExprMutator, ExprVisitor
from ..struct_info import TensorStructInfo
from ..utils import const_int

_CONV2D = Op.get("relax.nn.conv2d")
_ADD = Op.get("relax.add")
_BATCH_NORM = Op.get("relax.nn.batch_norm")
# What an expression computed from constants may read besides them: compile-time values and
# the kernels of call_tir.
_STATIC_LEAVES = (Constant, PrimValue, ShapeExpr, StringImm, DataTypeImm, GlobalVar)


class _UseCounter(ExprVisitor):
    """How many bindings (and function results) read each variable."""

    def __init__(self) -> None:
        self.uses: Counter[Var] = Counter()

    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.uses.update(used_vars(binding.value))
        super().visit_var_binding_(binding)

    def visit_seq_expr_(self, op: SeqExpr) -> None:
        self.uses.update(used_vars(op.body))
        super().visit_seq_expr_(op)


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule, uses: Counter[Var]):
        super().__init__(mod)
        self.uses = uses

    def _from_constants(self, expr: Expr) -> bool:
        """Whether ``expr`` is a constant or computed by operators from constants only."""
        if isinstance(expr, _STATIC_LEAVES):
            return True
        if isinstance(expr, Var):
            value = self.lookup_binding(expr)
            return value is not None and self._from_constants(value)
        if isinstance(expr, Tuple):
            return all(self._from_constants(f) for f in expr.fields)
        return (
            isinstance(expr, Call)
            and isinstance(expr.op, Op)
            and all(self._from_constants(a) for a in expr.args)
        )

    def _bound_once(self, var: Expr, op: Op) -> Call | None:
        """The call of ``op`` that ``var`` is bound to, when nothing else reads ``var``."""
        if not isinstance(var, Var) or self.uses[var] != 1:
            return None
        value = self.lookup_binding(var)
        return value if isinstance(value, Call) and value.op is op else None

    def _conv_and_bias(self, data: Expr) -> tuple[Call, Expr | None] | None:
        """``data``'s convolution and the bias added to it (None without)."""
        conv = self._bound_once(data, _CONV2D)
        if conv is not None:
            return conv, None
        biased = self._bound_once(data, _ADD)
        if biased is None:
            return None
        lhs, rhs = biased.args
        for operand, bias in ((lhs, rhs), (rhs, lhs)):
            conv = self._bound_once(operand, _CONV2D)
            if conv is not None:
                return conv, bias
        return None

    def _match(self, norm: Call) -> tuple[Call, Expr | None] | None:
        """The convolution ``norm`` folds into and its bias (the docstring's conditions)."""
        attrs = cast(Any, norm.attrs)
        if attrs["training"] or not all(self._from_constants(a) for a in norm.args[1:]):
            return None
        found = self._conv_and_bias(norm.args[0])
        if found is None:
            return None
        conv, bias = found
        if not self._from_constants(conv.args[1]):
            return None
        conv_attrs = cast(Any, conv.attrs)
        out_layout = conv_attrs["out_layout"]
        channel = out_layout.index("C")
        dtype = conv.args[1].struct_info.dtype  # type: ignore[attr-defined]
        if (
            not is_float(dtype)
            or conv_attrs["out_dtype"] not in ("void", dtype)
            or attrs["axis"] % len(out_layout) != channel
        ):
            return None
        if bias is not None and not (
            self._from_constants(bias) and _per_channel(bias, len(out_layout), channel)
        ):
            return None
        return conv, bias

    def visit_call_(self, op: Call) -> Expr:
        call = self.visit_expr_post_order(op)
        if not (isinstance(call, Call) and call.op is _BATCH_NORM):
            return call
        match = self._match(call)
        return call if match is None else self._fold(call, *match)

    def _fold(self, norm: Call, conv: Call, conv_bias: Expr | None) -> Expr:
        """Emit the rewrite of the module docstring; returns the tuple batch_norm returned."""
        emit = self.builder_.emit
        attrs, conv_attrs = cast(Any, norm.attrs), cast(Any, conv.attrs)
        _, gamma, beta, mean, var = norm.args
        data, weight = conv.args
        dtype = weight.struct_info.dtype  # type: ignore[attr-defined]
        std = emit(R.sqrt(R.add(var, const(attrs["epsilon"], dtype))))
        scale = emit(R.divide(gamma, std) if attrs["scale"] else R.divide(const(1.0, dtype), std))
        shift = emit(R.negative(R.multiply(mean, scale)))
        if attrs["center"]:
            shift = emit(R.add(shift, beta))
        kernel_layout, out_layout = conv_attrs["kernel_layout"], conv_attrs["out_layout"]
        w = emit(R.multiply(weight, R.reshape(scale, _along(kernel_layout, "O"))))
        out = emit(Call(_CONV2D, [data, w], conv.attrs))
        bias = emit(R.reshape(shift, _along(out_layout, "C")))
        if conv_bias is not None:
            channel_scale = emit(R.reshape(scale, _along(out_layout, "C")))
            bias = emit(R.add(bias, emit(R.multiply(conv_bias, channel_scale))))
        return Tuple([emit(R.add(out, bias)), mean, var])


def _per_channel(bias: Expr, ndim: int, channel: int) -> bool:
    """Whether ``bias``, broadcast to a tensor of ``ndim`` dims, varies only along ``channel``
    (a shape such as ``(1, C, 1, 1)``, ``(C, 1, 1)`` or ``()`` in NCHW)."""
    sinfo = bias.struct_info_
    dims = sinfo.shape_values if isinstance(sinfo, TensorStructInfo) else None
    if dims is None or len(dims) > ndim:
        return False
    return all(
        axis == channel or const_int(dim) == 1
        for axis, dim in zip(range(ndim - len(dims), ndim), dims)
    )


def _along(layout: str, axis: str) -> list[int]:
    """The shape that broadcasts a vector along ``axis`` of ``layout``: ``(1, -1, 1, 1)``."""
    return [-1 if name == axis else 1 for name in layout]


def FoldBatchnormToConv2D() -> transform.Pass:
    """The pass folding inference batch norms into the convolutions before them (see the
    module docstring); run it before LegalizeOps, with FoldConstant after."""

    @transform.module_pass(opt_level=0, name="FoldBatchnormToConv2D")
    def fold_batchnorm_to_conv2d(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function):
                counter = _UseCounter()
                counter.visit_expr(func)
                folded = _Folder(mod, counter.uses).visit_expr(func)
                if folded is not func:
                    # The replaced convolution (and its bias) go now, before anything
                    # lowers them.
                    mod.update_func(gv, remove_all_unused(folded))
        return mod

    return fold_batchnorm_to_conv2d


__all__ = ["FoldBatchnormToConv2D"]
