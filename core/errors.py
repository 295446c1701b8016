"""The one base of every refusal a service makes, with a message for whoever asked.

Services raise these; pages show the message, management commands print it, and the API
answers it with one status per kind (core.api_errors.exception_handler), so no app maps
its own exceptions to HTTP.
"""

from __future__ import annotations


class AppError(Exception):
    """A request the application refuses. `str()` is the message for the person who asked;
    `field`, when set, names the input it is about (the API keys its answer by it)."""

    field: str | None = None

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        if field is not None:
            self.field = field


class Invalid(AppError):
    """The input cannot be used as given (400)."""


class NotFound(AppError):
    """What the request names does not exist (404)."""


class Conflict(AppError):
    """The request clashes with the current state, e.g. a status moved meanwhile (409)."""


class Forbidden(AppError):
    """The person asking may not do this (403)."""


class TooLarge(AppError):
    """The upload is over the size the console accepts (413)."""
