"""The loop-overhead scenario played on other agent libraries, one module each.

Each module exposes `contender() -> Contender`; it imports its library lazily
so that `bench/loop_overhead.py` can skip a library that is not installed.
"""
