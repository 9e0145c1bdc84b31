"""Sinks: ``dp.create_sink(name, format, {"path": dir, ...})`` fed by
``@dp.append_flow(target=name)``: each flow's new rows written in the sink's format to its
``path``, each row once, as SDP's sink does (the content, not Spark's file layout).

One run, per flow: its streaming DataFrame runs with ``foreachBatch`` +
``trigger(availableNow=True)`` and its own checkpoint,
``<storage>/_checkpoints/_sinks/<sink>/<epoch>/<flow>``. Each micro-batch is written by Spark
(the sink's other options are the writer's options) into a hidden directory inside ``path``,
its files then renamed into ``path`` as ``<flow>-<epoch>-<batch>-<n>.<ext>``, then a marker
``_sparkmv_sink/<epoch>/<flow>/<batch>`` is written. Exactly once: a batch Spark replays
after a crash finds its marker and writes nothing, and one that has no marker first deletes
the files an earlier attempt renamed; readers of ``path`` skip ``_``/``.`` names, as Spark's
and pyarrow's readers do. A crash in the middle of the renames can leave part of one batch
visible until the next run completes it (never a row twice). ``delta`` sinks are appended by
deltalake, one Delta commit per batch carrying the transaction ``(sparkmv-<sink>-<flow>,
batch)``, so a replayed batch is never committed twice.

``--full-refresh`` of a sink starts new checkpoints (every source read from its start) and
writes its rows again; the sink's old files are not deleted (a sink is outside the
pipeline, as in SDP). A sink is not readable by other datasets.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sparkmv.pipeline.model import Dataset, PythonFlow
from sparkmv.pipeline.python_mv import PythonRefresh
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkmv.client.client import Client
    from sparkmv.pipeline.python_feeds import Feed

SINK_FORMATS = ("parquet", "json", "csv", "orc", "delta")
MARKERS = "_sparkmv_sink"


def refresh_sink(
    client: Client,
    sink: Dataset,
    frames: list[tuple[PythonFlow, DataFrame]],
    checkpoints: str,
    force: bool,
    feeds: Mapping[str, list[Feed]] | None = None,
) -> PythonRefresh:
    """Write every flow's new rows to ``sink`` (rules in the module docstring);
    ``checkpoints``: :func:`sparkmv.pipeline.python_stream.checkpoint_root`.

    Raises:
        SparkMvError: a flow returns a batch DataFrame, or its stream failed
            (``<file>:<line>: flow <name>: ...``).
    """
    from sparkmv.pipeline.python_stream import streaming_error

    root = warehouse.join(checkpoints, "_sinks", sink.name.qualified)
    epoch, fresh = _epoch(root, force)
    path = sink.options["path"]
    counts: dict[str, int] = {}
    for flow, df in frames:
        if not df.isStreaming:
            why = "a sink is fed by a streaming DataFrame (return spark.readStream...)"
            raise streaming_error(flow, ValueError(why))
        try:
            for feed in (feeds or {}).get(flow.name, []):
                feed.export(client, fresh)
            counts[flow.name] = _run(client, sink, flow, df, warehouse.join(root, epoch, flow.name), path, epoch)
        except Exception as exc:
            raise streaming_error(flow, exc) from exc
    flows = ", ".join(counts)
    total = sum(counts.values())
    if not total and not fresh:
        return PythonRefresh("SKIPPED", "SKIP", f"flows {flows}: no new input", None)
    detail = ", ".join(f"{f} {n}" for f, n in counts.items())
    return PythonRefresh("SUCCESS", "INCREMENTAL", f"flows {flows}: wrote {total} rows to {path} ({detail})", total)


def _epoch(root: str, force: bool) -> tuple[str, bool]:
    """The sink's checkpoint epoch (a new one when ``force`` or none yet) and whether it is new."""
    marker = warehouse.join(root, "_epoch")
    if not force and warehouse.exists(marker):
        with warehouse.open_input(marker) as f:
            return f.read().decode().strip(), False
    epoch = uuid.uuid4().hex
    temp = warehouse.join(root, f"_epoch-{epoch}.tmp")
    with warehouse.open_output(temp) as f:
        f.write(epoch.encode())
    warehouse.rename(temp, marker)
    for entry in warehouse.list_dir(root):  # the old epochs' checkpoints
        if not entry.name.startswith("_"):
            warehouse.remove_tree(warehouse.join(root, entry.name))
    return epoch, True


def _run(client: Client, sink: Dataset, flow: PythonFlow, df: DataFrame, checkpoint: str, path: str, epoch: str) -> int:
    """Run ``df``'s stream into the sink; the rows written."""
    written = [0]
    fmt = sink.sink_format or "parquet"
    options = {k: v for k, v in sink.options.items() if k != "path"}

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        marker = warehouse.join(path, MARKERS, epoch, flow.name, str(batch_id))
        if warehouse.exists(marker):  # replayed after a crash: already in the sink
            return
        if fmt == "delta":
            written[0] += _append_delta(batch, path, f"sparkmv-{sink.name.qualified}-{flow.name}-{epoch}", batch_id)
        else:
            written[0] += _append_files(batch, fmt, options, path, f"{flow.name}-{epoch[:8]}-{batch_id}-")
        with warehouse.open_output(marker) as f:
            f.write(b"")

    from sparkmv.pipeline.python_stream import run_available_now

    run_available_now(df, write_batch, checkpoint)
    return written[0]


def _append_files(batch: DataFrame, fmt: str, options: dict[str, str], path: str, prefix: str) -> int:
    """Write ``batch`` into ``path`` as files named ``<prefix><n>.<ext>``; its rows."""
    for entry in warehouse.list_dir(path):  # an earlier attempt at this batch
        if entry.name.startswith(prefix):
            warehouse.remove_file(warehouse.join(path, entry.name))
    temp = warehouse.join(path, f"_sparkmv_tmp-{uuid.uuid4().hex}")
    cached = batch.persist()
    try:
        rows = cached.count()
        if rows:
            cached.write.format(fmt).options(**options).mode("overwrite").save(warehouse.spark_path(temp))
    finally:
        cached.unpersist()
    parts = sorted((f for f in warehouse.list_files(temp) if not f.name.startswith(("_", "."))), key=lambda f: f.name)
    for n, part in enumerate(parts):
        suffix = part.name[part.name.index(".") :] if "." in part.name else ""
        warehouse.rename(part.path, warehouse.join(path, f"{prefix}{n}{suffix}"))
    warehouse.remove_tree(temp)
    return rows


def _append_delta(batch: DataFrame, path: str, app_id: str, batch_id: int) -> int:
    """Append ``batch`` to the Delta table at ``path`` in one commit carrying transaction
    ``(app_id, batch_id)`` (skipped when the table already has it); its rows."""
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    location = warehouse.spark_path(path)
    try:
        done = DeltaTable(location).transaction_version(app_id)
    except Exception:  # no table yet
        done = None
    if done is not None and done >= batch_id:
        return 0
    rows: Any = batch.toArrow()
    if rows.num_rows:
        props = CommitProperties(app_transactions=[Transaction(app_id, batch_id)])
        write_deltalake(location, rows, mode="append", commit_properties=props)
    return int(rows.num_rows)
