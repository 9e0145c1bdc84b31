"""Warehouse and staging file I/O: the one place sparkmv touches files by location.

Every read, write, listing and removal of warehouse files (Iceberg table data, staged
attempts of refresh runs) and of the files of external sources (Parquet ``LOCATION``,
a refreshable table's ``files`` source) goes through this module, built on fsspec
(``fsspec.core.url_to_fs``), so a warehouse on an object store (``s3://bucket/wh``) needs
configuration only: fsspec's ``s3fs`` package and credentials on the sparkmv side, the
Hadoop S3A jars on the Spark side.

A *location* is text: a local path (``/a/b``, the form every local caller used before), a
``file://`` URI (accepted, and stripped to the path), or any other fsspec URL
(``s3://bucket/key``, ``memory://x``). :func:`normalize` gives the one form locations are
compared and joined in: a local path exactly as ``str(pathlib.Path(...))`` writes it (so
stored listings and recorded file names of local warehouses are unchanged), a URL without
trailing ``/`` otherwise. Recorded data files use :func:`file_uri` (``file:///a/b`` for
local files, unencoded, as pyiceberg opens them), Spark gets :func:`spark_path`
(``s3a://`` for ``s3://``).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import IO, Any

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

Location = str | os.PathLike[str]
"""A local path (``str`` or ``pathlib.Path``), a ``file://`` URI or an fsspec URL."""

_FILE = "file://"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class FileInfo:
    """One file found by a listing.

    Attributes:
        path: its location (normalized: a local path, or the URL).
        name: the last component of ``path``.
        size: bytes.
        mtime_ns: modification time in nanoseconds since the epoch (``st_mtime_ns`` for
            local files; the store's last-modified time otherwise).
    """

    path: str
    name: str
    size: int
    mtime_ns: int


def is_url(location: Location) -> bool:
    """True for a URL other than ``file://`` (an object store, ``memory://``, ...)."""
    text = os.fspath(location)
    return "://" in text and not text.startswith(_FILE)


def normalize(location: Location) -> str:
    """The canonical text of ``location``.

    >>> normalize("file:///wh//ns.db/t/"), normalize("s3://b/wh/"), normalize("/a/./b")
    ('/wh/ns.db/t', 's3://b/wh', '/a/b')
    """
    text = os.fspath(location)
    if is_url(text):
        scheme, _, rest = text.partition("://")
        return f"{scheme}://{rest.rstrip('/')}" if rest.strip("/") else f"{scheme}://{rest}"
    return os.fspath(PurePosixPath(text.removeprefix(_FILE)))


def join(base: Location, *parts: str) -> str:
    """``base`` with ``parts`` appended, separated by ``/``.

    >>> join("file:///wh/t", "data", "run-3"), join("s3://b/t/", "data")
    ('/wh/t/data/run-3', 's3://b/t/data')
    """
    out = normalize(base)
    for part in (p.strip("/") for p in parts):
        if part:
            out = out + ("" if out.endswith("/") else "/") + part
    return normalize(out)


def name(location: Location) -> str:
    """The last component (``/wh/t/data/run-3`` -> ``run-3``)."""
    return posixpath.basename(normalize(location))


def parent(location: Location) -> str:
    """The location holding ``location`` (``s3://b/t/f.parquet`` -> ``s3://b/t``)."""
    return normalize(posixpath.dirname(normalize(location)))


def is_within(location: Location, directory: Location) -> bool:
    """True when ``location`` is ``directory`` or lies under it."""
    loc, top = normalize(location), normalize(directory)
    return loc == top or loc.startswith(top.rstrip("/") + "/")


def absolute(location: Location) -> str:
    """``location`` made absolute as ``pathlib.Path.absolute`` does (a relative local path
    is taken from the working directory, nothing else changes); URLs as they are.

    >>> absolute("file:///src/"), absolute("s3://b/src")
    ('/src', 's3://b/src')
    """
    text = normalize(location)
    if is_url(text) or text.startswith("/"):
        return text
    return normalize(os.getcwd() + "/" + text)


def file_uri(location: Location) -> str:
    """The URI a data file is recorded with: ``file://`` + the absolute path (unencoded:
    pyiceberg opens it as is) for a local file, the URL otherwise."""
    text = normalize(location)
    if is_url(text):
        return text
    return _FILE + absolute(text)


def catalog_uri(location: Location) -> str:
    """The warehouse as pyiceberg's catalog wants it: a ``file:`` URI of the absolute
    directory (percent-encoded), or the URL."""
    text = normalize(location)
    if is_url(text):
        return text
    return PurePosixPath(os.path.abspath(text)).as_uri()


def spark_path(location: Location) -> str:
    """What Spark reads and writes: local paths and ``file://`` URIs as they are,
    ``s3://`` as ``s3a://`` (Hadoop's S3A connector; ``s3://`` has no Hadoop filesystem)."""
    text = os.fspath(location)
    return "s3a://" + text[len("s3://") :] if text.startswith("s3://") else text


def _fs(location: Location) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem of ``location`` and the path within it."""
    text = normalize(location)
    if not is_url(text):
        return _LOCAL, text
    fs, path = url_to_fs(text)
    return fs, path


_LOCAL = LocalFileSystem()


# -- questions --------------------------------------------------------------------------------
def exists(location: Location) -> bool:
    """True when a file or directory is at ``location``."""
    fs, path = _fs(location)
    return bool(fs.exists(path))


def is_dir(location: Location) -> bool:
    """True when ``location`` is a directory (on an object store: a prefix with objects)."""
    fs, path = _fs(location)
    return bool(fs.isdir(path))


def is_file(location: Location) -> bool:
    """True when ``location`` is a file."""
    fs, path = _fs(location)
    return bool(fs.isfile(path))


def stat(location: Location) -> FileInfo:
    """Size and modification time of the file at ``location``.

    Raises:
        FileNotFoundError: when there is none.
    """
    fs, path = _fs(location)
    info = fs.info(path)
    return _file_info(fs, info, normalize(location))


# -- listing ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One entry of a directory: ``path`` (its location), ``name``, ``is_dir``."""

    path: str
    name: str
    is_dir: bool


def list_dir(location: Location) -> list[Entry]:
    """The entries directly under ``location``, sorted by name; empty when it is missing
    or not a directory."""
    fs, _ = _fs(location)
    base = normalize(location)
    out: list[Entry] = []
    for info in _ls(fs, base):
        entry_name = posixpath.basename(str(info["name"]).rstrip("/"))
        if not entry_name:
            continue
        entry = join(base, entry_name)
        out.append(Entry(entry, entry_name, _is_dir_info(fs, info, entry)))
    return sorted(out, key=lambda e: e.name)


def walk(
    location: Location, keep: Callable[[str], bool] | None = None
) -> Iterator[tuple[list[str], list[str], list[FileInfo]]]:
    """Walk the tree under ``location`` top-down, as ``os.walk`` does (symbolic links to
    directories are listed, not entered).

    Yields:
        ``(parts, directories, files)`` per directory: ``parts`` its names below
        ``location`` (``[]`` for ``location`` itself), the names of its sub-directories and
        its files, both sorted by name and limited to names ``keep`` accepts (directories
        not kept are not entered). Nothing when ``location`` is not a directory.
    """
    fs, _ = _fs(location)
    stack: list[tuple[list[str], str]] = [([], normalize(location))]
    while stack:
        parts, directory = stack.pop()
        dirs: list[str] = []
        files: list[FileInfo] = []
        for info in _ls(fs, directory):
            entry_name = posixpath.basename(str(info["name"]).rstrip("/"))
            if not entry_name or (keep is not None and not keep(entry_name)):
                continue
            entry = join(directory, entry_name)
            if _is_dir_info(fs, info, entry):
                dirs.append(entry_name)
            else:
                files.append(_file_info(fs, info, entry))
        dirs.sort()
        files.sort(key=lambda f: f.name)
        yield parts, dirs, files
        stack.extend(([*parts, d], join(directory, d)) for d in reversed(dirs) if not _is_link(fs, directory, d))


def list_files(location: Location, keep: Callable[[str], bool] | None = None) -> list[FileInfo]:
    """Every file under ``location`` (recursively, in :func:`walk` order), with size and
    modification time; names ``keep`` rejects are skipped (a directory with its contents)."""
    return [f for _parts, _dirs, files in walk(location, keep) for f in files]


def _ls(fs: fsspec.AbstractFileSystem, directory: str) -> list[dict[str, Any]]:
    """fsspec ``info`` dicts of the entries of ``directory`` (none when it is not one),
    listed now: object-store filesystems cache listings, which change detection must not
    see."""
    path = _fs(directory)[1]
    fs.invalidate_cache(path)
    try:
        if not fs.isdir(path):
            return []
        return list(fs.ls(path, detail=True))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _is_dir_info(fs: fsspec.AbstractFileSystem, info: dict[str, Any], location: str) -> bool:
    """True for a directory; fsspec types local symbolic links ``other``: one to a
    directory counts as a directory (as ``os.walk`` and ``DirEntry.is_dir`` do)."""
    if info.get("type") == "other" and isinstance(fs, LocalFileSystem):
        return os.path.isdir(location)
    return info.get("type") == "directory"


def _is_link(fs: fsspec.AbstractFileSystem, directory: str, entry: str) -> bool:
    return isinstance(fs, LocalFileSystem) and os.path.islink(join(directory, entry))


def _file_info(fs: fsspec.AbstractFileSystem, info: dict[str, Any], location: str) -> FileInfo:
    """A :class:`FileInfo` from an fsspec ``info`` dict. Local files are stat-ed again:
    fsspec gives float seconds, stored listings hold ``st_mtime_ns``."""
    if isinstance(fs, LocalFileSystem):
        st = os.stat(location)
        return FileInfo(location, name(location), st.st_size, st.st_mtime_ns)
    return FileInfo(location, name(location), int(info.get("size") or 0), _mtime_ns(fs, info))


def _mtime_ns(fs: fsspec.AbstractFileSystem, info: dict[str, Any]) -> int:
    """Modification time in ns from the keys stores use (``mtime``, ``LastModified``,
    ``last_modified``, ``created``), else ``fs.modified``."""
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            stamp = value if value.tzinfo else value.replace(tzinfo=UTC)
            delta = stamp - _EPOCH
            return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
        if isinstance(value, int | float) and not isinstance(value, bool):
            return round(float(value) * 1e9)
    return _mtime_ns(fs, {"mtime": fs.modified(info["name"])})


# -- changes ----------------------------------------------------------------------------------
def make_dirs(location: Location) -> None:
    """Create the local directory ``location`` and its parents (nothing when it exists;
    nothing on other filesystems: object stores have no directories, files are written
    under any key)."""
    fs, path = _fs(location)
    if isinstance(fs, LocalFileSystem):
        fs.makedirs(path, exist_ok=True)


def remove_file(location: Location) -> None:
    """Delete the file at ``location``; nothing when it is missing."""
    fs, path = _fs(location)
    try:
        fs.rm_file(path)
    except FileNotFoundError:
        pass


def remove_tree(location: Location) -> None:
    """Delete ``location`` with everything under it; nothing when it is missing."""
    fs, path = _fs(location)
    try:
        if fs.exists(path):
            fs.rm(path, recursive=True)
    except FileNotFoundError:
        pass


def remove_empty_dir(location: Location) -> bool:
    """Delete the directory ``location`` when it holds nothing; returns True when it did
    (an object store has no empty directories: True when nothing is under it)."""
    fs, path = _fs(location)
    if list_dir(location):
        return False
    try:
        fs.rmdir(path)
    except (FileNotFoundError, OSError):
        return not fs.exists(path)
    return True


def rename(source: Location, target: Location) -> None:
    """Move the file ``source`` to ``target`` (replacing it): atomic on local disks, a
    copy and a delete on object stores (whose writes are atomic per object anyway)."""
    fs, src = _fs(source)
    _, dst = _fs(target)
    if isinstance(fs, LocalFileSystem):
        os.replace(src, dst)
        return
    fs.mv(src, dst)


def open_input(location: Location) -> IO[bytes]:
    """The file at ``location`` opened for reading bytes (close it, e.g. with ``with``).

    Raises:
        FileNotFoundError: when it is missing.
    """
    fs, path = _fs(location)
    stream: IO[bytes] = fs.open(path, "rb")
    return stream


def open_output(location: Location) -> IO[bytes]:
    """The file at ``location`` opened for writing bytes (replacing it; parent
    directories are created)."""
    make_dirs(parent(location))
    fs, path = _fs(location)
    stream: IO[bytes] = fs.open(path, "wb")
    return stream


# -- Parquet files ----------------------------------------------------------------------------
def parquet_metadata(location: Location) -> Any:
    """The footer (``pyarrow.parquet.FileMetaData``) of the Parquet file at ``location``.

    Raises:
        OSError: missing or unreadable. pyarrow.ArrowInvalid: not a Parquet file.
    """
    import pyarrow.parquet as pq

    if not is_url(location):
        return pq.read_metadata(normalize(location))
    with open_input(location) as fh:
        return pq.read_metadata(fh)


def parquet_schema(location: Location) -> Any:
    """The Arrow schema (``pyarrow.Schema``) of the Parquet file at ``location``; raises
    as :func:`parquet_metadata`."""
    import pyarrow.parquet as pq

    if not is_url(location):
        return pq.read_schema(normalize(location))
    with open_input(location) as fh:
        return pq.read_schema(fh)


def read_parquet(location: Location) -> Any:
    """The whole Parquet file at ``location`` as a ``pyarrow.Table``; raises as
    :func:`parquet_metadata`."""
    import pyarrow.parquet as pq

    if not is_url(location):
        return pq.read_table(normalize(location))
    with open_input(location) as fh:
        return pq.read_table(fh)


def write_parquet(table: Any, location: Location, **options: Any) -> None:
    """Write the ``pyarrow.Table`` to a Parquet file at ``location`` (``options`` go to
    ``pyarrow.parquet.write_table``).

    Raises:
        OSError: when it cannot be written.
    """
    import pyarrow.parquet as pq

    if not is_url(location):
        pq.write_table(table, normalize(location), **options)
        return
    with open_output(location) as fh:
        pq.write_table(table, fh, **options)
