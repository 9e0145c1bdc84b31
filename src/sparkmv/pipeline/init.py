"""``sparkmv pipeline init NAME``: the skeleton project of ``spark-pipelines init``
(pyspark 4.1's ``pyspark/pipelines/init_cli.py``): the same files, the same contents."""

from __future__ import annotations

from pathlib import Path

from sparkmv.errors import SparkMvError

SPEC = """
name: {{ name }}
storage: {{ storage_root }}
libraries:
  - glob:
      include: transformations/**
"""

PYTHON_EXAMPLE = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()

@dp.materialized_view
def example_python_materialized_view() -> DataFrame:
    return spark.range(10)
"""

SQL_EXAMPLE = """CREATE MATERIALIZED VIEW example_sql_materialized_view AS
SELECT id FROM example_python_materialized_view
WHERE id % 2 = 0
"""


def init_project(name: str, parent: Path) -> Path:
    """Create ``parent/name`` with ``spark-pipeline.yml``, ``pipeline-storage/`` and two
    example definitions under ``transformations/``; returns the project directory.

    Raises:
        SparkMvError: when the directory exists (SDP's text).
    """
    project = parent / name
    if project.exists():
        raise SparkMvError(
            f"Directory '{name}' already exists. Please choose a different name or remove the existing directory."
        )
    project.mkdir(parents=True)
    storage = project / "pipeline-storage"
    storage.mkdir()
    spec = SPEC.replace("{{ name }}", name).replace("{{ storage_root }}", f"file://{storage.resolve()}")
    (project / "spark-pipeline.yml").write_text(spec)
    transformations = project / "transformations"
    transformations.mkdir()
    (transformations / "example_python_materialized_view.py").write_text(PYTHON_EXAMPLE)
    (transformations / "example_sql_materialized_view.sql").write_text(SQL_EXAMPLE)
    return project
