"""Fuzzing the reference codec's decode entry points (and the testee framing) with hostile bytes.

    python -m reference_tools.fuzz list                       # the targets
    python -m reference_tools.fuzz decode --seconds 60        # one target, coverage-guided (atheris)
    python -m reference_tools.fuzz all --seconds 30           # every target, one after the other
    python -m reference_tools.fuzz decode --engine random     # without atheris: seeded random mutation

Each target (targets.py) takes the fuzzer's bytes and returns when the entry point behaved:
it decoded the input, or refused it with the one error type it documents (``WireError`` for
the codec, ``ProtocolError`` for the runner's framing). Anything else - another exception
type, a decoded value that does not re-encode to stable bytes, a call into a tripwired
function (``os.system``, ``subprocess.Popen``, ``eval``...) - is a crash. libFuzzer's
``-timeout`` and ``-rss_limit_mb`` turn hangs and memory blow-ups into crashes too.

Seeds are the golden vectors (every struct, three variants) and the hand-made hostile
cases of corpus.py; crashes are written to ``--artifacts`` (default ``./fuzz-artifacts``).
atheris comes with the ``fuzz`` extra (``pip install -e '.[fuzz]'``).
"""
