"""The command's first code: ``python -m waitfor``, and the console script (``__main__:run``).

Before anything else, even the rest of waitfor's own start-up: SIGINT, SIGTERM and SIGHUP end
the process at once, in waitfor's one line, with 130/143/129. Nothing has started yet that would
need cleaning up, and an exit leaves nothing for Python to swallow or print (its default SIGINT
handler raises KeyboardInterrupt: a traceback). :func:`waitfor.cli.signals.install` then puts the
handlers the command works with in their place. Only ``_signal`` and ``os`` are used here, both
loaded by the interpreter's own start-up: no import time precedes the handlers.

What comes earlier is the interpreter's: its start-up (site, runpy, the console script's
imports) and ``waitfor/__init__``, which imports nothing. A signal there meets Python's own
handling (tests/reliability/test_early_signals.py says which outcomes that allows).
"""

try:
    import _signal  # type: ignore[import-not-found]  # signal's C half, no stub; signal imports enum
    import os

    #: the one line for an interrupt (as Signalled.describe says it): no enum to import for names
    _NAMES = {_signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM", _signal.SIGHUP: "SIGHUP"}

    def _interrupted(signum: int, frame: object) -> None:
        os.write(2, f"waitfor: error: interrupted by {_NAMES[signum]}\n".encode())
        os._exit(128 + signum)

    for _signum in _NAMES:
        # an interrupt inherited ignored (a background job's SIGINT, nohup's SIGHUP) stays so
        if _signal.getsignal(_signum) != _signal.SIG_IGN:
            _signal.signal(_signum, _interrupted)
except KeyboardInterrupt:  # a Ctrl-C before the handler was in place (seen in CI): the same line
    import os

    os.write(2, b"waitfor: error: interrupted by SIGINT\n")
    os._exit(130)

from waitfor.cli.entry import run  # after the handlers: that is the point

if __name__ == "__main__":
    run()
