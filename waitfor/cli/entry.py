"""The ``waitfor`` command's entry point (console script, ``python -m waitfor``): the signal
handlers first (:mod:`.signals`, the standard library's ``signal`` only), then the command."""

from __future__ import annotations

import os

from waitfor.cli.signals import install, pending, signalled_in

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def run() -> NoReturn:
    """The ``waitfor`` command (console script, ``python -m waitfor``)."""
    try:
        install()  # inside: a signal may land the moment its handler is in place
        from waitfor.cli import command
    except BaseException as exc:  # installing, importing: nothing else has started
        signalled = signalled_in(exc) or pending()  # or lost by Python (waitfor.cli.command.run)
        if signalled is None:
            raise
        os.write(2, f"waitfor: error: {signalled.describe()}\n".encode())
        os._exit(128 + signalled.signum)
    command.run()
