"""The error hierarchy of sparkmv: one root, specific subclasses.

Every error a user can cause derives from :class:`SparkMvError`; the CLI prints
``error: <message>`` for these and exits 1. Anything else is a bug and shows a
traceback.
"""

from __future__ import annotations


class SparkMvError(Exception):
    """Root of every sparkmv error."""


class ParseError(SparkMvError):
    """A statement could not be parsed; the message gives the position."""


class InvalidNameError(SparkMvError):
    """A name is not a plain identifier (``name`` or ``namespace.name``)."""


class ObjectNotFoundError(SparkMvError):
    """A table, materialized view or run that does not exist."""


class ObjectExistsError(SparkMvError):
    """Creating an object whose name is already taken."""


class AnalysisError(SparkMvError):
    """A query does not analyse: unknown column or table, type error, bad PARTITION BY."""


class InvalidPropertyError(SparkMvError):
    """A property name or value that sparkmv does not accept."""


class SourceError(SparkMvError):
    """A base table or associated source cannot be read (missing LOCATION, bad rows)."""


class RefreshError(SparkMvError):
    """A refresh could not be started or did not complete."""


class BusyError(RefreshError):
    """A refresh was requested for an object that is not ``IDLE``."""


class InactiveError(RefreshError):
    """A refresh was requested for an inactive materialized view."""


class LeaseLostError(RefreshError):
    """The owner of a run lost its lease (it expired and recovery took over)."""


class RefreshCancelledError(RefreshError):
    """The run was cancelled by a control command."""


class CatalogError(SparkMvError):
    """The metadata catalog is unreachable or in an unexpected state."""


class StorageError(SparkMvError):
    """An Iceberg operation failed (commit conflict, missing files)."""


class RefreshFailedError(RefreshError):
    """A synchronous refresh ended FAILED or CANCELLED (raised with ``raise_on_failure=True``).

    Attributes:
        run: the finished :class:`~sparkmv.refresh.result.RefreshRun` (state, error, ids).
    """

    def __init__(self, message: str, run: object) -> None:
        super().__init__(message)
        self.run = run


class InputFileError(SparkMvError):
    """A file or directory named on the command line (``-f``, ``--home``) cannot be used."""


class ScriptError(SparkMvError):
    """A statement of a script failed; the message names its number and line.

    Attributes:
        number: 1-based statement number; line: its first line in the script.
    """

    def __init__(self, message: str, number: int, line: int) -> None:
        super().__init__(message)
        self.number = number
        self.line = line
