"""LATHE_LOGS from Python: compile log lines go to the `lathe` logger (stderr by default)."""
import logging

from . import _C

logger = logging.getLogger("lathe")


def _emit(message):
    logger.warning(message)


def install():
    # Warnings reach stderr through logging's last-resort handler when nothing is configured,
    # and pytest's caplog / an application's handlers see them as records of "lathe".
    _C._set_compile_log_sink(_emit)


def set_logs(topics):
    """Like LATHE_LOGS: a comma list of "recompiles", "guards", "graph", "passes" or "all" ("" for
    none); the process default options' logs (lathe.compile_options()["logs"])."""
    _C.set_compile_logs(topics)
