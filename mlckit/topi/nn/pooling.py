"""2-d pooling in NCHW layout: ``pool2d``, ``max_pool2d``, ``avg_pool2d``, ``adaptive_pool``,
and ``pool_grad``, the gradient of ``pool2d``.

Average pooling divides by the window size when ``count_include_pad`` is true (padding
counts as zeros, as PyTorch's default), and by the number of window positions inside the
unpadded input when it is false. With ``ceil_mode`` the output rounds up (a last window that
would start in the padding after the input is dropped, as torch and TVM drop it:
``topi.utils.window_count``), and window positions past the explicit padding count in
neither case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit import arith, te
from mlckit.errors import StructInfoError
from mlckit.tir import op as tir_op
from mlckit.tir.expr import IntImm, PrimExpr, const

from ..utils import as_float, axis_names, shape_text, window_count
from .conv2d import pad_tuple, pair
from .pad import pad


def _check_pool_input(op: str, data: te.Tensor, pool_type: str, layout: str) -> None:
    if layout != "NCHW":
        raise StructInfoError(f"{op}: only the NCHW layout is supported, got {layout!r}")
    if pool_type not in ("max", "avg"):
        raise StructInfoError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if data.ndim != 4:
        raise StructInfoError(f"{op}: needs a 4-d NCHW input, got {shape_text(data.shape)}")


class _Windows:
    """The windows of a 2-d pooling: sizes, strides, dilations and padding of both axes, the
    output height and width, and the helpers the forward and backward kernels share."""

    def __init__(
        self,
        op: str,
        data: te.Tensor,
        kernel: int | Sequence[int],
        stride: int | Sequence[int],
        dilation: int | Sequence[int],
        padding: int | Sequence[int],
        ceil_mode: bool,
    ) -> None:
        self.kh, self.kw = pair(kernel, "kernel", op)
        self.sh, self.sw = pair(stride, "stride", op)
        self.dh, self.dw = pair(dilation, "dilation", op)
        self.top, self.left, self.bottom, self.right = pad_tuple(padding, op)
        self.ceil_mode = ceil_mode
        _, _, self.height, self.width = data.shape
        self.out_h = self._out_dim(self.height, self.top, self.bottom, self.kh, self.sh, self.dh)
        self.out_w = self._out_dim(self.width, self.left, self.right, self.kw, self.sw, self.dw)

    def _out_dim(self, size: PrimExpr, before: int, after: int, k: int, s: int, d: int) -> PrimExpr:
        return window_count(size, before, after, k, s, d, self.ceil_mode)

    def padded(self, data: te.Tensor, fill: PrimExpr) -> te.Tensor:
        """``data`` padded with ``fill`` (block ``pad_temp``) so that every window lies inside,
        or ``data`` itself when no padding is needed."""
        pad_after: list[Any] = [0, 0, self.bottom, self.right]
        if self.ceil_mode:
            # Rounding up lets the last windows run past the bottom/right padding: pad those
            # positions with the fill as well.
            axes = [
                (self.out_h, self.height, self.kh, self.sh, self.dh, self.top + self.bottom),
                (self.out_w, self.width, self.kw, self.sw, self.dw, self.left + self.right),
            ]
            for axis, (out, size, k, s, d, pads) in enumerate(axes, start=2):
                past = (out - 1) * s + (k - 1) * d + 1 - (size + pads)
                pad_after[axis] = arith.simplify(
                    pad_after[axis] + tir_op.max(past, const(0, past.dtype))
                )
        if not (self.ceil_mode or any((self.top, self.left, self.bottom, self.right))):
            return data
        return pad(data, [0, 0, self.top, self.left], pad_after, fill, name="pad_temp")

    def divisor(self, y: PrimExpr, x: PrimExpr, count_include_pad: bool, dtype: str) -> PrimExpr:
        """What average pooling divides window ``(y, x)``'s sum by (see the module docstring)."""
        if count_include_pad and not self.ceil_mode:
            return const(float(self.kh * self.kw), dtype)
        height, width = self.height, self.width
        top, left, bottom, right = self.top, self.left, self.bottom, self.right
        lo_h, hi_h = (0, height + top + bottom) if count_include_pad else (top, height + top)
        lo_w, hi_w = (0, width + left + right) if count_include_pad else (left, width + left)
        rows = _positions_inside(y * self.sh, self.kh, self.dh, lo_h, hi_h)
        cols = _positions_inside(x * self.sw, self.kw, self.dw, lo_w, hi_w)
        count = tir_op.max(rows * cols, const(1, rows.dtype))
        return as_float(count, dtype)


def pool2d(
    data: te.Tensor,
    kernel: int | Sequence[int],
    stride: int | Sequence[int],
    dilation: int | Sequence[int],
    padding: int | Sequence[int],
    pool_type: str,
    ceil_mode: bool = False,
    layout: str = "NCHW",
    count_include_pad: bool = True,
) -> te.Tensor:
    """Max (``pool_type="max"``, block ``pool_max``) or average (``"avg"``, blocks
    ``pool_sum`` and ``pool_avg``) over ``kernel`` windows; padding is
    ``(top, left, bottom, right)`` (or an int, or ``(h, w)``) and is applied in a
    ``pad_temp`` block when non-zero."""
    op = "topi.nn.pool2d"
    _check_pool_input(op, data, pool_type, layout)
    win = _Windows(op, data, kernel, stride, dilation, padding, ceil_mode)
    fill = tir_op.min_value(data.dtype) if pool_type == "max" else const(0, data.dtype)
    temp = win.padded(data, fill)
    rv0 = te.reduce_axis((0, win.kh), name="rv0")
    rv1 = te.reduce_axis((0, win.kw), name="rv1")
    out_shape = (data.shape[0], data.shape[1], win.out_h, win.out_w)
    names = axis_names(4)

    def window(reducer: Any) -> Any:
        def body(*i: PrimExpr) -> Any:
            n, c, y, x = i
            row = arith.simplify(y * win.sh + rv0.var * win.dh)
            col = arith.simplify(x * win.sw + rv1.var * win.dw)
            value = temp[n, c, row, col]
            return reducer(value, axis=[rv0, rv1])

        return body

    if pool_type == "max":
        return te.compute(
            out_shape, window(te.max), name="pool_max", tag="pool_max", varargs_names=names
        )
    total = te.compute(
        out_shape, window(te.sum), name="pool_sum", tag="pool_sum", varargs_names=names
    )

    def average(*i: PrimExpr) -> PrimExpr:
        return total[i] / win.divisor(i[2], i[3], count_include_pad, data.dtype)

    return te.compute(out_shape, average, name="pool_avg", tag="elemwise", varargs_names=names)


def _positions_inside(start: PrimExpr, k: int, d: int, lo: Any, hi: Any) -> PrimExpr:
    """How many of the window positions ``start + r*d`` (``0 <= r < k``) lie in ``[lo, hi)``
    (positions are in padded coordinates)."""

    def first_at_or_after(bound: Any) -> PrimExpr:
        # The smallest r with start + r*d >= bound, clamped to [0, k].
        r = (bound - start + (d - 1)) // d
        return tir_op.min(tir_op.max(r, const(0, start.dtype)), const(k, start.dtype))

    return arith.simplify(first_at_or_after(hi) - first_at_or_after(lo))


def pool_grad(
    grads: te.Tensor,
    data: te.Tensor,
    kernel: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    pool_type: str,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    layout: str = "NCHW",
    dilation: int | Sequence[int] = 1,
) -> te.Tensor:
    """The gradient of ``pool2d`` with respect to ``data``, given ``grads``, the gradient of
    its output (block ``pool_grad``).

    Input row ``h`` is tap ``r`` of output row ``y`` when ``y * s + r * d = h + top``, so each
    input element sums the output gradients of the windows it is a tap of: at most
    ``ceil(((k - 1) * d + 1) / s)`` windows per axis, the one starting at or before ``h + top``
    and those before it (one for a 2x2 window moving by 2, two for 3x3 by 2; several windows
    when they overlap). Average pooling passes ``grads / divisor`` (block ``pool_grad_scaled``)
    to every tap; max pooling passes ``grads`` to the window's first largest element only, as
    PyTorch does: block ``pool_argmax`` finds the smallest tap ``r0 * kw + r1`` holding the
    maximum (block ``pool_max``).
    """
    op = "topi.nn.pool_grad"
    _check_pool_input(op, data, pool_type, layout)
    win = _Windows(op, data, kernel, stride, dilation, padding, ceil_mode)
    batch, channel = data.shape[:2]
    out_shape = (batch, channel, win.out_h, win.out_w)
    if grads.ndim != 4 or not all(
        arith.Analyzer().can_prove_equal(g, o) for g, o in zip(grads.shape, out_shape)
    ):
        raise StructInfoError(
            f"{op}: the output gradient {shape_text(grads.shape)} does not have the pooling's "
            f"output shape {shape_text(out_shape)}"
        )
    names = axis_names(4)
    rv0 = te.reduce_axis((0, win.kh), name="rv0")
    rv1 = te.reduce_axis((0, win.kw), name="rv1")
    if pool_type == "max":
        temp = win.padded(data, tir_op.min_value(data.dtype))

        def tap_value(n: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
            row = arith.simplify(y * win.sh + rv0.var * win.dh)
            col = arith.simplify(x * win.sw + rv1.var * win.dw)
            return temp[n, c, row, col]

        largest = te.compute(
            out_shape,
            lambda *i: te.max(tap_value(*i), axis=[rv0, rv1]),
            name="pool_max",
            tag="pool_max",
            varargs_names=names,
        )
        a0 = te.reduce_axis((0, win.kh), name="rv0")
        a1 = te.reduce_axis((0, win.kw), name="rv1")

        def first_tap(*i: PrimExpr) -> PrimExpr:
            n, c, y, x = i
            value = temp[
                n,
                c,
                arith.simplify(y * win.sh + a0.var * win.dh),
                arith.simplify(x * win.sw + a1.var * win.dw),
            ]
            tap = arith.simplify(a0.var * win.kw + a1.var)
            none = const(win.kh * win.kw, tap.dtype)
            return te.min(tir_op.if_then_else(value == largest[i], tap, none), axis=[a0, a1])

        argmax = te.compute(
            out_shape, first_tap, name="pool_argmax", tag="pool_argmax", varargs_names=names
        )
    else:
        scaled = te.compute(
            out_shape,
            lambda *i: grads[i] / win.divisor(i[2], i[3], count_include_pad, grads.dtype),
            name="pool_grad_scaled",
            tag="elemwise",
            varargs_names=names,
        )

    # The windows that may hold input row h: the one starting at or just before it and the
    # ceil(span / s) - 1 before that, span = (k - 1) * d + 1 the rows a window covers.
    spans = [(k - 1) * d + 1 for k, d in ((win.kh, win.dh), (win.kw, win.dw))]
    j0 = te.reduce_axis((0, -(-spans[0] // win.sh)), name="j0")
    j1 = te.reduce_axis((0, -(-spans[1] // win.sw)), name="j1")

    def gather(n: PrimExpr, c: PrimExpr, h: PrimExpr, w: PrimExpr) -> PrimExpr:
        inside: list[PrimExpr] = []
        windows: list[PrimExpr] = []
        taps: list[PrimExpr] = []
        for i, before, j, s, d, span, out in (
            (h, win.top, j0.var, win.sh, win.dh, spans[0], win.out_h),
            (w, win.left, j1.var, win.sw, win.dw, spans[1], win.out_w),
        ):
            padded = arith.simplify(i + before)
            window = arith.simplify(tir_op.floordiv(padded, s) - j)
            offset = arith.simplify(tir_op.floormod(padded, s) + j * s)  # from the window's start
            inside += [window >= 0, window < out]
            if -(-span // s) * s > span:  # else every offset lies in the window
                inside.append(offset < span)
            if d > 1:  # the row lies between two taps of a dilated window
                inside.append(tir_op.floormod(offset, d) == 0)
                offset = tir_op.floordiv(offset, d)
            windows.append(window)
            taps.append(offset)
        y, x = windows
        if pool_type == "max":
            inside.append(argmax[n, c, y, x] == arith.simplify(taps[0] * win.kw + taps[1]))
            value = grads[n, c, y, x]
        else:
            value = scaled[n, c, y, x]
        condition = inside[0]
        for term in inside[1:]:
            condition = condition & term
        zero = const(0, grads.dtype)
        return te.sum(tir_op.if_then_else(condition, value, zero), axis=[j0, j1])

    return te.compute(data.shape, gather, name="pool_grad", tag="pool_grad", varargs_names=names)


def max_pool2d(
    data: te.Tensor,
    kernel: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
) -> te.Tensor:
    """Max pooling over NCHW ``data`` (the stride defaults to the kernel size)."""
    return pool2d(data, kernel, stride or kernel, dilation, padding, "max", ceil_mode)


def avg_pool2d(
    data: te.Tensor,
    kernel: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> te.Tensor:
    """Average pooling over NCHW ``data`` (see the module docstring for the divisor)."""
    return pool2d(
        data,
        kernel,
        stride or kernel,
        dilation,
        padding,
        "avg",
        ceil_mode,
        count_include_pad=count_include_pad,
    )


def adaptive_pool(
    data: te.Tensor,
    output_size: int | Sequence[int],
    pool_type: str,
    layout: str = "NCHW",
) -> te.Tensor:
    """Max (``pool_type="max"``, block ``adaptive_pool_max``) or average (``"avg"``, blocks
    ``adaptive_pool_sum`` and ``adaptive_pool_avg``) of NCHW ``data`` down to ``output_size``
    (an int or ``(height, width)``).

    Output row ``i`` of ``out`` rows pools input rows ``start <= h < end`` with
    ``start = floor(i * H / out)`` and ``end = ceil((i + 1) * H / out)`` (columns alike), as
    PyTorch and TVM do. When ``out`` does not divide ``H`` the windows may overlap and differ
    in length, but a loop nest needs fixed bounds: the reduction then runs over the longest
    window and masks the positions past each window's own length. The window lengths are
    worked out from the input size, which must therefore be static.
    """
    op = "topi.nn.adaptive_pool"
    _check_pool_input(op, data, pool_type, layout)
    batch, channel, height, width = data.shape
    if not isinstance(height, IntImm) or not isinstance(width, IntImm):
        raise StructInfoError(
            f"{op}: needs a static height and width to size the windows, got the input shape "
            f"{shape_text(data.shape)}"
        )
    out_h, out_w = pair(output_size, "output_size", op)
    if min(out_h, out_w) < 1:
        raise StructInfoError(f"{op}: output_size must be positive, got {output_size!r}")
    rows = _AdaptiveWindows(height.value, out_h)
    cols = _AdaptiveWindows(width.value, out_w)
    rv0 = te.reduce_axis((0, rows.longest), name="rv0")
    rv1 = te.reduce_axis((0, cols.longest), name="rv1")
    out_shape = (batch, channel, out_h, out_w)
    names = axis_names(4)
    fill = tir_op.min_value(data.dtype) if pool_type == "max" else const(0, data.dtype)

    def window(reducer: Any) -> Any:
        def body(*i: PrimExpr) -> Any:
            n, c, y, x = i
            value = data[n, c, rows.start(y) + rv0.var, cols.start(x) + rv1.var]
            inside = [
                r.var < w.length(o) for r, w, o in ((rv0, rows, y), (rv1, cols, x)) if w.ragged
            ]
            if inside:
                cond = inside[0] if len(inside) == 1 else inside[0] & inside[1]
                value = tir_op.if_then_else(cond, value, fill)
            return reducer(value, axis=[rv0, rv1])

        return body

    if pool_type == "max":
        return te.compute(
            out_shape,
            window(te.max),
            name="adaptive_pool_max",
            tag="adaptive_pool_max",
            varargs_names=names,
        )
    total = te.compute(
        out_shape,
        window(te.sum),
        name="adaptive_pool_sum",
        tag="adaptive_pool_sum",
        varargs_names=names,
    )

    def average(*i: PrimExpr) -> PrimExpr:
        count = rows.length(i[2]) * cols.length(i[3])  # an int when no window is ragged
        if isinstance(count, int):
            return total[i] / const(float(count), data.dtype)
        return total[i] / as_float(count, data.dtype)

    return te.compute(
        out_shape, average, name="adaptive_pool_avg", tag="elemwise", varargs_names=names
    )


def _window(i: Any, size: int, out: int) -> tuple[Any, Any]:
    """``(start, end)`` of the input positions that output position ``i`` of ``out`` pools
    (``i`` an int or an index expression): ``floor(i * size / out)``,
    ``ceil((i + 1) * size / out)``."""
    return i * size // out, ((i + 1) * size + out - 1) // out


class _AdaptiveWindows:
    """The windows of ``out`` output positions over ``size`` input positions."""

    def __init__(self, size: int, out: int) -> None:
        self.size, self.out = size, out
        lengths = [end - start for start, end in (_window(i, size, out) for i in range(out))]
        self.longest = max(lengths)
        # Windows of one length need no mask (they may overlap: 5 -> 2 gives [0, 3), [2, 5)).
        self.ragged = len(set(lengths)) > 1

    def start(self, i: PrimExpr) -> PrimExpr:
        return arith.simplify(_window(i, self.size, self.out)[0])

    def length(self, i: PrimExpr) -> PrimExpr | int:
        """The length of window ``i``: an int when all windows have the same one."""
        if not self.ragged:
            return self.longest
        start, end = _window(i, self.size, self.out)
        return arith.simplify(end - start)
