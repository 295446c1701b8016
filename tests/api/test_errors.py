"""One mapping from application errors to API answers (core.api_errors)."""

import pytest
from django.core.exceptions import ValidationError

from clusters.importing import ImportRefused
from collectors.bundles import BundleRefused
from collectors.services import SnapshotRefused
from core.api_errors import exception_handler
from core.errors import AppError, Conflict, Forbidden, Invalid, NotFound
from incidents.services import InvalidTransition


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (Invalid("no"), 400),
        (NotFound("no"), 404),
        (Conflict("no"), 409),
        (Forbidden("no"), 403),
        (AppError("no"), 400),
        (InvalidTransition("INC-1 is closed"), 409),
        (SnapshotRefused("no nodes"), 409),
        (ImportRefused("'nodes' must be a list"), 400),
    ],
)
def test_each_kind_of_refusal_has_one_status(error, status):
    response = exception_handler(error, {})
    assert response.status_code == status
    assert response.data == {"detail": str(error)}


def test_a_refusal_about_one_input_is_keyed_by_it():
    assert exception_handler(BundleRefused("not a tar archive"), {}).data == {
        "bundle": "not a tar archive"
    }
    assert exception_handler(Invalid("too long", field="title"), {}).data == {"title": "too long"}


def test_model_validation_is_a_400_keyed_by_field():
    response = exception_handler(ValidationError({"name": ["taken"]}), {})
    assert (response.status_code, response.data) == (400, {"name": ["taken"]})


def test_anything_else_is_left_to_drf_and_a_bug_stays_a_500():
    assert exception_handler(KeyError("bug"), {}) is None
