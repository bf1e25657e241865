"""Benchmarks: pickle vs msgpack, codec (codec_bench) and end to end (serve_bench).

Every comparison runs its cases side by side in one process and one run, interleaved,
and reports medians, spread and per-repetition ratios - never a timed pass/fail.
`ipc-conformance bench codec|serve` is the command line (cli.py); docs/benchmarks.md
has the commands and the tables of a reference machine.
"""
