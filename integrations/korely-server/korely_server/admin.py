"""The administrator's page, ``/admin``."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/admin", include_in_schema=False)
