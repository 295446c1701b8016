"""The API's one mapping from application errors to answers: nothing a client sends is a 500."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from .errors import AppError, Conflict, Forbidden, Invalid, NotFound, TooLarge

STATUS_BY_ERROR: dict[type[AppError], int] = {
    Invalid: status.HTTP_400_BAD_REQUEST,
    NotFound: status.HTTP_404_NOT_FOUND,
    Conflict: status.HTTP_409_CONFLICT,
    Forbidden: status.HTTP_403_FORBIDDEN,
    TooLarge: status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
}


def exception_handler(exc, context):
    """Application errors and model validation become 4xx with the message; the rest is
    DRF's own handling (its 4xx exceptions, and None, a 500, for a bug)."""
    if isinstance(exc, AppError):
        set_rollback()
        return Response({exc.field or "detail": str(exc)}, status=_status_of(exc))
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "message_dict") else {"detail": exc.messages}
        return Response(detail, status=status.HTTP_400_BAD_REQUEST)
    return drf_exception_handler(exc, context)


def _status_of(exc: AppError) -> int:
    for kind in type(exc).__mro__:
        if kind in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[kind]
    return status.HTTP_400_BAD_REQUEST  # a bare AppError: the request cannot be served as sent
