"""ExternalCatalogStore: the external Iceberg catalogs (``smv_external_catalogs``)."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.database import add_unique
from sparkmv.catalog.models import ExternalCatalogRow


class ExternalCatalogStore:
    """Registers, finds and drops external catalogs inside a caller's session."""

    @staticmethod
    def insert(session: Session, name: str, catalog_type: str, properties: dict[str, str]) -> ExternalCatalogRow:
        """Register catalog ``name`` (lower case) with its properties as written.

        Raises:
            ObjectExistsError: when a catalog of that name exists.
        """
        row = ExternalCatalogRow(name=name, catalog_type=catalog_type, properties=properties, created_at=utcnow())
        add_unique(session, row, f"catalog '{name}' already exists")
        return row

    @staticmethod
    def find(session: Session, name: str) -> ExternalCatalogRow | None:
        """The catalog named ``name``, or None."""
        return session.scalars(select(ExternalCatalogRow).where(ExternalCatalogRow.name == name)).one_or_none()

    @staticmethod
    def list(session: Session) -> list[ExternalCatalogRow]:
        """Every external catalog, by name."""
        return list(session.scalars(select(ExternalCatalogRow).order_by(ExternalCatalogRow.name)))

    @staticmethod
    def delete(session: Session, name: str) -> None:
        """Forget catalog ``name`` (nothing of the catalog itself is touched)."""
        session.execute(delete(ExternalCatalogRow).where(ExternalCatalogRow.name == name))
        session.flush()
