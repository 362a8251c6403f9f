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

A batch norm is folded when all of these hold, and is otherwise left as it is:

=============================  ================================================================
``training=False``             training normalizes with the batch's own statistics
its data is bound to a         another producer has no weight to scale
``relax.nn.conv2d``
the weight and the four        the new weight and bias must be computable at build
statistics are constants       (BindParams first binds a model's weights)
the convolution's result has   otherwise the convolution would run twice, once without
no other use                   the batch norm
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
from mlckit.ir.module import IRModule
from mlckit.ir.op import Op

from .. import op as R
from ..analysis.analysis import used_vars
from ..expr import Call, Constant, Expr, Function, SeqExpr, Tuple, Var, VarBinding, const
from ..expr_functor import ExprMutator, ExprVisitor

_CONV2D = Op.get("relax.nn.conv2d")
_BATCH_NORM = Op.get("relax.nn.batch_norm")


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

    def _constant(self, expr: Expr) -> Constant | None:
        if isinstance(expr, Var):
            expr = self.lookup_binding(expr)  # type: ignore[assignment]
        return expr if isinstance(expr, Constant) else None

    def _conv2d_to_fold(self, norm: Call) -> Call | None:
        """The convolution ``norm`` may be folded into (the conditions of the docstring)."""
        data, attrs = norm.args[0], cast(Any, norm.attrs)
        if attrs["training"] or not isinstance(data, Var) or self.uses[data] != 1:
            return None
        conv = self.lookup_binding(data)
        if not (isinstance(conv, Call) and conv.op is _CONV2D):
            return None
        weight = self._constant(conv.args[1])
        if weight is None or any(self._constant(a) is None for a in norm.args[1:]):
            return None
        conv_attrs = cast(Any, conv.attrs)
        dtype = weight.data.dtype
        if not is_float(dtype) or conv_attrs["out_dtype"] not in ("void", dtype):
            return None
        out_layout = conv_attrs["out_layout"]
        if attrs["axis"] % len(out_layout) != out_layout.index("C"):
            return None
        return conv

    def visit_call_(self, op: Call) -> Expr:
        call = self.visit_expr_post_order(op)
        if not (isinstance(call, Call) and call.op is _BATCH_NORM):
            return call
        conv = self._conv2d_to_fold(call)
        return call if conv is None else self._fold(call, conv)

    def _fold(self, norm: Call, conv: Call) -> Expr:
        """Emit the rewrite of the module docstring; returns the tuple batch_norm returned."""
        emit = self.builder_.emit
        attrs, conv_attrs = cast(Any, norm.attrs), cast(Any, conv.attrs)
        _, gamma, beta, mean, var = norm.args
        weight = cast(Constant, self._constant(conv.args[1]))
        dtype = weight.data.dtype
        std = emit(R.sqrt(R.add(var, const(attrs["epsilon"], dtype))))
        scale = emit(R.divide(gamma, std) if attrs["scale"] else R.divide(const(1.0, dtype), std))
        shift = emit(R.negative(R.multiply(mean, scale)))
        if attrs["center"]:
            shift = emit(R.add(shift, beta))
        kernel_layout = conv_attrs["kernel_layout"]
        channels = weight.data.shape[kernel_layout.index("O")]
        w = emit(R.multiply(weight, R.reshape(scale, _along(kernel_layout, "O", channels))))
        out = emit(Call(_CONV2D, [conv.args[0], w], conv.attrs))
        bias = emit(R.reshape(shift, _along(conv_attrs["out_layout"], "C", channels)))
        return Tuple([emit(R.add(out, bias)), mean, var])


def _along(layout: str, axis: str, extent: int) -> list[int]:
    """The shape that broadcasts a vector of ``extent`` along ``axis`` of ``layout``."""
    return [extent if name == axis else 1 for name in layout]


def FoldBatchnormToConv2D() -> transform.Pass:
    """The pass folding inference batch norms into the convolutions before them (see the
    module docstring); run it before LegalizeOps, with FoldConstant after."""

    @transform.module_pass(opt_level=0, name="FoldBatchnormToConv2D")
    def fold_batchnorm_to_conv2d(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function):
                counter = _UseCounter()
                counter.visit_expr(func)
                folder = _Folder(mod, counter.uses)
                mod.update_func(gv, folder.visit_expr(func))
        return mod

    return fold_batchnorm_to_conv2d


__all__ = ["FoldBatchnormToConv2D"]
