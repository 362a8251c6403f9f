"""Relax passes (``relax.transform.BindParams(...)(mod)``)."""

from .bind_params import BindParams, bind_params

__all__ = ["BindParams", "bind_params"]
