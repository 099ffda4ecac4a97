"""zarr's ``ZipStore`` with every read bounded: a zip bomb costs nothing.

zarr's ``ZipStore`` reads a whole member (``f.read()``): a 3 MB zip whose member inflates to
3 GB took 3 GB before anything could refuse it, a block or a zipped ``attributes.json``
alike. :class:`BoundedZipStore` checks the size the member's header declares against the
cap (:func:`~napari_n5zarr.n5.constants.max_stored_bytes`) before reading, then reads at most
one byte past the cap (``zipfile`` stops at the declared size: a header that lies about it
ends in a CRC error, reported naming the member). A file that is no zip archive (another
format, a truncated download) is refused when it is opened, naming it; a member that does
not inflate is invalid data naming the member (:class:`~napari_n5zarr.errors.N5FormatError`),
a failing disk an :class:`~napari_n5zarr.errors.N5StoreError`.
"""

from __future__ import annotations

import lzma
import os
import zipfile
import zlib
from typing import TYPE_CHECKING

from zarr.storage import ZipStore

from napari_n5zarr.byte_ranges import byte_span
from napari_n5zarr.errors import N5BlockError, N5FormatError, N5MetadataError, N5StoreError
from napari_n5zarr.n5.constants import ReadLimit, check_stored_size, max_stored_bytes
from napari_n5zarr.storage.local import is_metadata_key
from napari_n5zarr.zarr_internals import zip_archive

if TYPE_CHECKING:
    from zarr.abc.buffer import Buffer, BufferPrototype
    from zarr.abc.store import ByteRequest


def not_a_zip(path: object, error: BaseException | None = None) -> N5FormatError:
    """The one line for a file that is no zip archive (another format, a truncated download)."""
    reason = (
        (" ".join(str(error).split()) or type(error).__name__)
        if error is not None
        else "File is not a zip file"
    )
    return N5FormatError(f"{path}: not a zip archive, or a truncated one ({reason})")


def require_zip_archive(path: str | os.PathLike[str]) -> None:
    """Refuse (:func:`not_a_zip`) an existing file at ``path`` that is no zip archive."""
    if not zipfile.is_zipfile(path):
        raise not_a_zip(os.fspath(path))


class BoundedZipStore(ZipStore):
    """``ZipStore`` whose reads are capped before and while they inflate."""

    limited_reads = True
    """:meth:`get` takes ``limit``: a block's dataset's own cap (see :class:`ReadLimit`)."""

    def where(self, key: str) -> str:
        """``archive.zip/key`` (for messages)."""
        return f"{self.path}/{key}"

    async def _open(self) -> None:
        try:
            await super()._open()
        except zipfile.BadZipFile as e:
            raise not_a_zip(self.path, e) from None

    def _archive(self) -> zipfile.ZipFile:
        """The open archive (opened on first use)."""
        try:
            return zip_archive(self)
        except zipfile.BadZipFile as e:
            raise not_a_zip(self.path, e) from None

    def member_names(self) -> list[str]:
        """Every member's name, as the archive stores it."""
        return self._archive().namelist()

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None,
                  *, limit: ReadLimit | None = None) -> Buffer | None:  # fmt: skip
        with self._lock:
            return self._get(key, prototype, byte_range, limit)

    def _get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None,
             limit: ReadLimit | None = None) -> Buffer | None:  # fmt: skip
        metadata = is_metadata_key(key)
        try:
            info = self._archive().getinfo(key)
        except KeyError:
            return None
        start, end = byte_span(byte_range, info.file_size)
        check_stored_size(
            end - start,
            f"{self.where(key)} (zip member declares {info.file_size} bytes)",
            metadata=metadata,
            limit=limit,
        )
        try:
            with self._archive().open(info) as f:
                f.seek(start)
                data = f.read(min(end - start, max_stored_bytes(metadata, limit) + 1))
        except (
            zipfile.BadZipFile,
            EOFError,
            zlib.error,
            lzma.LZMAError,
            NotImplementedError,
        ) as e:  # the bytes, not the disk
            error = N5MetadataError if metadata else N5BlockError
            raise error(
                f"{self.where(key)}: broken zip member ({' '.join(str(e).split()) or type(e).__name__})"
            ) from None
        except (OSError, ValueError) as e:
            raise N5StoreError(f"cannot read {self.where(key)}: {e}") from None
        check_stored_size(len(data), self.where(key), metadata=metadata, limit=limit)
        return prototype.buffer.from_bytes(data)
