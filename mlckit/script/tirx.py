"""``from mlckit.script import tirx as T``: TVM's newer name of the TensorIR namespace."""

import sys

from . import tir

# The same module object, so that T.block and friends are the very statements the parser knows.
sys.modules[__name__] = tir
