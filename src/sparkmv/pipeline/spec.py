"""The pipeline spec: SDP's ``spark-pipeline.yml`` found, parsed and validated.

The rules and the error texts are those of pyspark's ``spark-pipelines`` CLI
(``pyspark/pipelines/cli.py`` and ``error-conditions.json`` of pyspark 4.1): the spec is
``spark-pipeline.yaml`` or ``spark-pipeline.yml`` in the current directory or the nearest
ancestor; fields ``name`` and ``storage`` are required, ``catalog``, ``database`` (or
``schema``), ``configuration`` (a string-to-string dict) and ``libraries`` (a list of
``{glob: {include: PATTERN}}``) optional, any other field is refused; a pattern is a file
path or a folder path ending in ``/**``. sparkmv adds one rule: a pattern that matches no
file is an error (``spark-pipelines`` logs "Found 0 files" and goes on).

Every error is a :class:`PipelineSpecError` whose message starts with the spec file's path.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkmv.errors import SparkMvError

SPEC_FILE_NAMES = ("spark-pipeline.yaml", "spark-pipeline.yml")
ALLOWED_FIELDS = ("name", "storage", "catalog", "database", "schema", "configuration", "libraries")
REFRESH_KEY = "sparkmv.refresh"
"""``configuration`` key: the refresh scheme of the pipeline's datasets (``MANUAL``, ``ASYNC``,
``ASYNC EVERY (INTERVAL n UNIT)``), run by ``sparkmv scheduler`` in dependency order."""
REQUIRED_FIELDS = ("name", "storage")


class PipelineSpecError(SparkMvError):
    """A pipeline spec that cannot be found, read or validated."""


@dataclass(frozen=True)
class PipelineSpec:
    """A validated spec.

    Attributes:
        path: the spec file (absolute); root: its directory, where globs are resolved.
        libraries: the normalised glob patterns (``dir/**`` becomes ``dir/**/*``).
    """

    path: Path
    name: str
    storage: str
    catalog: str | None = None
    database: str | None = None
    configuration: dict[str, str] = field(default_factory=dict)
    libraries: tuple[str, ...] = ()

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def spark_conf(self) -> dict[str, str]:
        """The ``configuration`` entries that are Spark settings (``sparkmv.*`` keys are
        sparkmv's own, :data:`REFRESH_KEY`)."""
        return {k: v for k, v in self.configuration.items() if not k.startswith("sparkmv.")}

    def refresh_scheme(self) -> str | None:
        """The refresh scheme every materialized view and streaming table of the pipeline
        gets (``configuration: {sparkmv.refresh: "ASYNC EVERY (INTERVAL 1 HOUR)"}``), as
        ``ALTER MATERIALIZED VIEW ... REFRESH`` takes it, normalised; None when not set.

        Raises:
            PipelineSpecError: ``<spec>: configuration sparkmv.refresh: <why>``.
        """
        text = self.configuration.get(REFRESH_KEY)
        if text is None:
            return None
        from sparkmv.sql.parser import parse_statement

        try:
            stmt = parse_statement(f"ALTER MATERIALIZED VIEW x REFRESH {text}")
        except SparkMvError as exc:
            raise PipelineSpecError(f"{self.path}: configuration {REFRESH_KEY}: {exc}") from None
        scheme = getattr(stmt, "refresh", None)
        return scheme.text if scheme is not None else None

    def files(self) -> list[Path]:
        """The definition files the globs name, in glob order then path order, each once.

        Raises:
            PipelineSpecError: ``<spec>: glob `P` in libraries matches no file``; or a file
                that is neither ``.py`` nor ``.sql`` (SDP's text).
        """
        out: list[Path] = []
        for pattern in self.libraries:
            found = sorted(p for p in self.root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
            if not found:
                written = pattern.removesuffix("/*") if pattern.endswith("/**/*") else pattern
                raise PipelineSpecError(f"{self.path}: glob `{written}` in libraries matches no file")
            for p in found:
                if p.suffix not in (".py", ".sql"):
                    raise PipelineSpecError(
                        f"{self.path}: Pipeline definitions file `{p}` has an unsupported extension. "
                        "Supported extensions are `.py` and `.sql`."
                    )
                if p not in out:
                    out.append(p)
        return out


def find_spec(start: Path, spec: Path | None = None) -> Path:
    """The spec file: ``spec`` when given, else the one in ``start`` or its nearest ancestor.

    Raises:
        PipelineSpecError: SDP's PIPELINE_SPEC_FILE_DOES_NOT_EXIST, MULTIPLE_PIPELINE_SPEC_FILES_FOUND
            or PIPELINE_SPEC_FILE_NOT_FOUND text.
    """
    if spec is not None:
        if not spec.is_file():
            raise PipelineSpecError(f"The pipeline spec file `{spec}` does not exist.")
        return spec.absolute()
    current = start.absolute()
    while True:
        found = [current / n for n in SPEC_FILE_NAMES if (current / n).is_file()]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise PipelineSpecError(
                f"Multiple pipeline spec files found in the directory `{current}`. "
                "Please remove one or choose a particular one with the --spec argument."
            )
        if current.parent == current:
            raise PipelineSpecError(
                "No spark-pipeline.yaml or spark-pipeline.yml file provided in arguments or found in "
                f"directory `{start.absolute()}` or readable ancestor directories."
            )
        current = current.parent


def load_spec(path: Path) -> PipelineSpec:
    """Read and validate the spec at ``path`` (see the module docstring for the rules).

    Raises:
        PipelineSpecError: ``<path>: <SDP's message>`` for a bad field, or ``<path>: not a YAML
            mapping`` / ``<path>: <YAML error>``.
    """
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PipelineSpecError(f"{path}: cannot read the pipeline spec: {_first_line(exc)}") from exc
    if not isinstance(data, dict):
        raise PipelineSpecError(f"{path}: the pipeline spec is not a YAML mapping")
    try:
        return _unpack(path.absolute(), data)
    except PipelineSpecError as exc:
        raise PipelineSpecError(f"{path}: {exc}") from None


def _unpack(path: Path, data: dict[Any, Any]) -> PipelineSpec:
    for key in data:
        if key not in ALLOWED_FIELDS:
            raise PipelineSpecError(f"Pipeline spec field `{key}` is unexpected.")
    for key in REQUIRED_FIELDS:
        if key not in data:
            raise PipelineSpecError(f"Pipeline spec missing required field `{key}`.")
    for key in ("name", "storage", "catalog", "database", "schema"):
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise PipelineSpecError(f"Pipeline spec field `{key}` should be a string, got {type(data[key]).__name__}.")
    return PipelineSpec(
        path=path,
        name=data["name"],
        storage=data["storage"],
        catalog=data.get("catalog"),
        database=data.get("database", data.get("schema")),
        configuration=_str_dict(data.get("configuration", {}), "configuration"),
        libraries=tuple(_glob(_include(entry)) for entry in data.get("libraries") or []),
    )


def _include(entry: Any) -> str:
    """``entry["glob"]["include"]`` of one ``libraries`` item."""
    try:
        pattern = entry["glob"]["include"]
    except (TypeError, KeyError):
        raise PipelineSpecError("each item of `libraries` should be `glob: {include: PATTERN}`") from None
    if not isinstance(pattern, str):
        raise PipelineSpecError(f"glob include should be a string, got {type(pattern).__name__}.")
    return pattern


def _glob(pattern: str) -> str:
    """SDP's ``validate_patch_glob_pattern``: a plain path, or ``folder/**`` (made ``folder/**/*``)."""
    if not glob.has_magic(pattern):
        return pattern
    if pattern.endswith("/**") and not glob.has_magic(pattern[:-3]):
        return pattern + "/*"
    raise PipelineSpecError(
        f"Invalid glob pattern `{pattern}` in libraries. Only file paths, or folder paths ending with /** are allowed."
    )


def _str_dict(d: Any, field_name: str) -> dict[str, str]:
    """SDP's ``validate_str_dict``."""
    if not isinstance(d, dict):
        raise PipelineSpecError(f"Pipeline spec field `{field_name}` should be a dict, got {type(d).__name__}.")
    for key, value in d.items():
        if not isinstance(key, str):
            raise PipelineSpecError(
                f"For pipeline spec field `{field_name}`, key should be a string, got {type(key).__name__}."
            )
        if not isinstance(value, str):
            raise PipelineSpecError(
                f"For pipeline spec field `{field_name}`, value for key `{key}` should be a string, "
                f"got {type(value).__name__}."
            )
    return dict(d)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
