"""Every error and warning this package raises, in one place.

Each error is also the builtin it refines (as zarr-python's ``errors.py``): a missing node is a
:class:`NodeNotFoundError` *and* a ``FileNotFoundError``, so ``except FileNotFoundError`` keeps
working. Leaf module: imports nothing beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BLOCK_NAME_ATTR",
    "ClusterError",
    "DeadlineExceeded",
    "DestinationBusyError",
    "DestinationLockError",
    "EnvironmentVariableError",
    "ExportCancelled",
    "InvalidArgumentError",
    "MissingPackageError",
    "N5BlockError",
    "N5FormatError",
    "N5MetadataError",
    "N5StoreError",
    "N5ZarrError",
    "NodeExistsError",
    "NodeNotFoundError",
    "NotEditableError",
    "NothingToConvertError",
    "PlantedFileError",
    "SkippedNodeWarning",
    "StaleLayerError",
    "ValuesDoNotFitError",
    "located",
]


class N5ZarrError(Exception):
    """Base of every error raised by napari-n5zarr."""


class N5FormatError(N5ZarrError, ValueError):
    """Data or metadata that is not valid N5, or that this library cannot represent."""


class N5MetadataError(N5FormatError, KeyError):
    """A metadata document (``attributes.json``/``zarr.json``) that cannot be read or translated.

    It is also a ``KeyError`` on purpose: zarr-python skips a group member whose metadata
    raises ``KeyError`` with a warning that carries this message, so one unreadable child
    is reported without hiding its siblings.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(N5ZarrError, ValueError):
    """An argument this library refuses before doing anything (a block size too small, a
    destination inside the source); the message says what to give instead."""


class EnvironmentVariableError(InvalidArgumentError):
    """An ``N5ZARR_*`` environment variable whose value cannot be used; the message names the
    variable, its value and what it takes (see :mod:`napari_n5zarr.environment`)."""


class MissingPackageError(N5ZarrError, ModuleNotFoundError):
    """An optional package this needs is not installed; the message names what it was for
    (the URL, the scheduler address) and the ``pip install`` that adds it."""


class N5BlockError(N5FormatError):
    """A block that cannot be decoded (unsupported mode, bad header, wrong size)."""


BLOCK_NAME_ATTR = "_n5_block_name"
"""Attribute an :class:`~napari_n5zarr.n5.stores.N5DefaultStore` sets on each block buffer it
returns ("N5 block s0/0/1 in /data/x.n5"), so the codec, which never sees keys, can name
the block in its errors."""


def located(error: N5BlockError, where: str | None) -> N5BlockError:
    """``error`` with the block's name in front: ``"N5 block s0/3/2/1 in /data/x.n5: ..."``.

    Parameters
    ----------
    error
        The block error, whose message does not name the block yet.
    where
        The block's name, or None (the message then starts with ``"N5 block"``).

    Returns
    -------
    N5BlockError
        ``error`` itself when its message already starts with ``where``, else a new error
        of the same class.
    """
    message = str(error)
    if where and message.startswith(where):
        return error
    return type(error)(f"{where or 'N5 block'}: {message}")


class N5StoreError(N5ZarrError, OSError):
    """A key that cannot be read from its store: a remote fault or timeout (after retries),
    or a local entry that is not a regular file. The message names the path or URL.

    Deliberately not a ``FileNotFoundError``: a 500 or a timeout is not a missing key, and
    must never read as "no such node" or as a fill-value block.
    """


class NodeNotFoundError(N5ZarrError, FileNotFoundError):
    """No N5/Zarr node (or no container) where one was asked for; the message names the place."""


class NodeExistsError(N5ZarrError, FileExistsError):
    """A node already exists where a new one was to be created; nothing was changed."""


class DestinationBusyError(N5ZarrError, OSError):
    """Another export holds the destination's lock (or one of a folder above it)."""


class DestinationLockError(N5ZarrError, OSError):
    """The lock file beside a destination is not one this package wrote (a symbolic or hard
    link, a folder, a FIFO, a file of other content): refused, nothing was changed."""


class DeadlineExceeded(N5ZarrError, TimeoutError):
    """One attempt at a remote read took longer than its deadline
    (:attr:`~napari_n5zarr.storage.remote.RemoteSettings.deadline`); retried as a timeout, and
    after the last attempt reported as an :class:`N5StoreError`."""


class NotEditableError(N5ZarrError, ValueError):
    """The node cannot be edited in place (the message says why and what to do)."""


class PlantedFileError(DestinationLockError):
    """Something the save path did not write sits at a name it uses (its journal, a staged
    block, a block's folder): a link, a folder, a FIFO, someone's file. Refused, naming
    it; nothing was changed."""


class StaleLayerError(N5ZarrError, ValueError):
    """The dataset's dtype, block size or shape changed on disk since the layer opened:
    the layer's edits cannot be saved into it (reopen the layer)."""


class ValuesDoNotFitError(InvalidArgumentError):
    """Values that the dataset's dtype cannot hold (never wrapped or clipped): nothing written."""


class NothingToConvertError(N5ZarrError, ValueError):
    """The source holds no readable image or labels array; ``skipped`` lists the unreadable nodes."""

    def __init__(self, message: str, skipped: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.skipped = list(skipped)


class ExportCancelled(N5ZarrError):
    """The export was cancelled (see ``cancel`` of :func:`napari_n5zarr.export`); the
    partial output was removed."""


class ClusterError(N5ZarrError, OSError):
    """A dask.distributed cluster could not run an export: a worker died running a task
    more often than ``distributed.scheduler.allowed-failures`` allows, or no worker was
    there for the export's ``worker_timeout``. The partial output was removed."""


class SkippedNodeWarning(UserWarning):
    """A node could not be read; its siblings were still read."""
