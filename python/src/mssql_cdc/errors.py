"""The reference's errors, raised from the library's status codes.

Every error a call of this package raises for a failing library call is one
of the reference's kinds (``mcdc_status_kind``): ``DataLossError``,
``SchemaChangedError``, ``PermissionError``, ``ValueError`` or
``RuntimeError``, each as a subclass that also derives from
``MssqlCdcError`` and carries the library's status (``code``, ``status``)
and, for an error SQL Server returned, its number. The message is the
library's.
"""
from __future__ import annotations

import re


class MssqlCdcError(Exception):
    """What every error from the library carries besides its message."""

    code: int = 0
    """The library's status code (include/mssqlcdc.h: -9 data loss...)."""
    status: str = ""
    """Its name: "dataloss", "invalid", "mismatch"..."""
    server_number: int = 0
    """SQL Server's error number when the error came from the server, else 0."""


class DataLossError(RuntimeError, MssqlCdcError):
    """Changes not read yet were purged by CDC cleanup (or are held only by a
    disabled capture instance). Recover with a re-snapshot
    (``stream(..., on_data_loss="resnapshot")``)."""


class SchemaChangedError(RuntimeError, MssqlCdcError):
    """The source's schema changed in a way the running job cannot absorb:
    run it again (it re-reads the schema), or change the target first when
    the message asks to."""


class CdcPermissionError(PermissionError, MssqlCdcError):
    """A grant is missing (the message names it)."""


class CdcValueError(ValueError, MssqlCdcError):
    """Bad options or arguments, or state of another job (a checkpoint bound
    to other arguments, a table of another kind...)."""


class CdcRuntimeError(RuntimeError, MssqlCdcError):
    """Anything else: the source unreachable, the storage failing, state on
    disk that cannot be trusted."""


_KINDS = {"DataLossError": DataLossError, "SchemaChangedError": SchemaChangedError,
          "PermissionError": CdcPermissionError, "ValueError": CdcValueError,
          "RuntimeError": CdcRuntimeError}


def _raised(exc: BaseException, error: type) -> bool:
    # In Spark a worker's error reaches the caller as Spark's exception, whose
    # text holds the worker's traceback: "<module>.<class>: <message>". The
    # reference's class names (mssql_cdc.client.*) count too, and so does the
    # library's own "<Kind>: " prefix of an Arrow stream's error.
    if isinstance(exc, error):
        return True
    text = str(exc)
    name = error.__qualname__
    return (f"{error.__module__}.{name}:" in text or f"mssql_cdc.client.{name}:" in text
            or re.match(rf"\s*{name}: ", text) is not None)


def is_data_loss(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``DataLossError``, or an error that was raised
    because of one (in Spark, or through an Arrow reader)."""
    return _raised(exc, DataLossError)


def is_schema_changed(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``SchemaChangedError``, or an error raised
    because of one (as ``is_data_loss``)."""
    return _raised(exc, SchemaChangedError)


def error_for(code: int, message: str, server_number: int = 0) -> MssqlCdcError:
    """The exception of a library status code, with its message."""
    from . import _native
    lib = _native.lib()
    kind = (lib.mcdc_status_kind(code) or b"").decode() or "RuntimeError"
    exc = _KINDS.get(kind, CdcRuntimeError)(message)
    exc.code = code
    exc.status = (lib.mcdc_status_name(code) or b"").decode()
    exc.server_number = server_number
    return exc


def raise_error(code: int, err) -> None:
    """Raises the error of a failing call (its mcdc_error)."""
    message = err.message.decode("utf-8", errors="replace") if err is not None else ""
    if not message:
        message = f"libmssqlcdc failed with status {code}"
    raise error_for(code, message, err.server_number if err is not None else 0) from None


def from_stream_error(text: str) -> MssqlCdcError | None:
    """An Arrow stream's error ("<Kind>: <message>", get_last_error) as the
    kind's exception; None when the text has no kind."""
    m = re.match(r"\s*(DataLossError|SchemaChangedError|PermissionError|ValueError|"
                 r"RuntimeError): (.*)", text, re.S)
    if m is None:
        return None
    exc = _KINDS[m.group(1)](m.group(2))
    # the stream says the kind, not the status: the kinds of one status each
    exc.code, exc.status = _STREAM_CODES.get(m.group(1), (0, ""))
    return exc


_STREAM_CODES = {"DataLossError": (-9, "dataloss"), "SchemaChangedError": (-10, "schema"),
                 "PermissionError": (-11, "permission")}
