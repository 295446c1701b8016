"""API errors: service exceptions become 4xx with a message; nothing a client sends is a 500."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def exception_handler(exc, context):
    """Service errors become 4xx with a message; nothing a client sends is a 500."""
    from collectors.services import SnapshotRefused
    from incidents.importing import ImportRefused
    from incidents.services import InvalidTransition

    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "message_dict") else {"detail": exc.messages}
        return Response(detail, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, InvalidTransition | SnapshotRefused):
        exc = Conflict(str(exc))
    elif isinstance(exc, ImportRefused):
        exc = exceptions.ValidationError({"detail": str(exc)})
    return drf_exception_handler(exc, context)
