"""Reference solutions of the exercises, one module per chapter (revealed by ``solution()``)."""
