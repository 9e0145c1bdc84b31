"""The metadata catalog: SQLAlchemy models, Alembic migrations, stores, CAS transitions."""

from sparkmv.catalog.facade import Catalog
from sparkmv.catalog.states import ControlCommand, ObjectKind, RefreshState, RunState, Trigger

__all__ = ["Catalog", "ControlCommand", "ObjectKind", "RefreshState", "RunState", "Trigger"]
