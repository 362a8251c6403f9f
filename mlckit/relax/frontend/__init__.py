"""Frontends: models from other frameworks (``frontend.torch``: ``from_fx``,
``from_exported_program``) and ``frontend.nn``, a small module API to write models without
one. Nothing in the compiler imports them; torch is imported only by ``frontend.torch``."""
