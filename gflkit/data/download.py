"""Getting a dataset's missing raw files.

Downloads
---------
Only files with a URL can be downloaded (``urllib`` with a timeout, progress with ``tqdm``). A file whose
canonical distribution is an archive (``RawFile.member``) is obtained by downloading the archive and
extracting that member; the member's sha256 is checked (and the archive's, when pinned). Downloads go to
a temporary file beside the target and are only moved into place after the hash matched, so a failed or
corrupted download leaves nothing behind. Set ``GFLKIT_OFFLINE=1`` to never try the network.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import IO, Sequence

from gflkit.data.errors import ChecksumError, DatasetNotFoundError, DownloadError
from gflkit.data.integrity import CHUNK, FileStatus, verify_dataset
from gflkit.data.registry import DatasetSpec, RawFile, data_root, get_spec, is_writable

ENV_OFFLINE = "GFLKIT_OFFLINE"
DEFAULT_TIMEOUT = 60.0


def _offline() -> bool:
    return os.environ.get(ENV_OFFLINE, "").strip().lower() not in ("", "0", "false", "no")


def _progress(total: int | None, label: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label, leave=False,
                disable=not enabled)


def _fetch_url(url: str, target: IO[bytes], timeout: float, progress: bool) -> str:
    """Stream ``url`` into ``target``; returns the sha256 of what was written."""
    digest = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "gflkit-data/0.1"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        length = response.headers.get("Content-Length") if hasattr(response, "headers") else None
        total = int(length) if length and length.isdigit() else None
        with _progress(total, url.rsplit("/", 1)[-1], progress) as bar:
            for block in iter(lambda: response.read(CHUNK), b""):
                target.write(block)
                digest.update(block)
                bar.update(len(block))
    return digest.hexdigest()


def _find_member(names: Sequence[str], member: str) -> str | None:
    for name in names:
        if name == member or name.lstrip("./") == member.lstrip("./"):
            return name
    for name in names:
        if name.endswith("/" + member):
            return name
    return None


def _extract_member(archive: Path, member: str, target: IO[bytes]) -> str:
    """Copy one archive member (tar.* or zip) into ``target``; returns its sha256."""
    digest = hashlib.sha256()

    def copy(source: IO[bytes]) -> None:
        for block in iter(lambda: source.read(CHUNK), b""):
            target.write(block)
            digest.update(block)

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            found = _find_member(zf.namelist(), member)
            if found is None:
                raise DownloadError(f"archive {archive.name} has no member {member!r}")
            with zf.open(found) as source:
                copy(source)
    else:
        try:
            with tarfile.open(archive, "r:*") as tf:
                members = {m.name: m for m in tf.getmembers() if m.isfile()}
                found = _find_member(list(members), member)
                if found is None:
                    raise DownloadError(f"archive {archive.name} has no member {member!r}")
                source = tf.extractfile(members[found])
                assert source is not None
                copy(source)
        except tarfile.TarError as exc:
            raise DownloadError(f"cannot read downloaded archive {archive.name}: {exc}") from exc
    return digest.hexdigest()


def _temp_in(folder: Path, name: str) -> tuple[IO[bytes], Path]:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
    return os.fdopen(fd, "wb"), Path(tmp)


def _download_source(urls: tuple[str, ...], raws: Sequence[RawFile], raw_dir: Path, *,
                     timeout: float, progress: bool) -> None:
    """Download one source (a file, or an archive holding several members) and place the verified files."""
    errors: list[Exception] = []
    for url in urls:
        temps: list[Path] = []
        try:
            placed: list[tuple[Path, Path]] = []
            archive_needed = raws[0].member is not None
            first_dest = raw_dir / raws[0].path
            first_dest.parent.mkdir(parents=True, exist_ok=True)
            handle, download_tmp = _temp_in(first_dest.parent, Path(raws[0].path).name)
            temps.append(download_tmp)
            with handle:
                downloaded_sha = _fetch_url(url, handle, timeout, progress)
            if not archive_needed:
                raw = raws[0]
                if downloaded_sha != raw.sha256:
                    raise ChecksumError(url, raw.sha256, downloaded_sha,
                                        "The downloaded file does not match the pinned sha256; nothing was kept.")
                placed.append((download_tmp, first_dest))
            else:
                pinned = raws[0].archive_sha256
                if pinned and downloaded_sha != pinned:
                    raise ChecksumError(url, pinned, downloaded_sha,
                                        "The downloaded archive does not match the pinned sha256; nothing was kept.")
                for raw in raws:
                    dest = raw_dir / raw.path
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    out, member_tmp = _temp_in(dest.parent, Path(raw.path).name)
                    temps.append(member_tmp)
                    with out:
                        member_sha = _extract_member(download_tmp, raw.member or raw.path, out)
                    if member_sha != raw.sha256:
                        raise ChecksumError(f"{url}!{raw.member}", raw.sha256, member_sha,
                                            "The extracted member does not match the pinned sha256; nothing was kept.")
                    placed.append((member_tmp, dest))
            for tmp, dest in placed:  # every hash matched: move into place
                os.replace(tmp, dest)
                temps.remove(tmp)
            return
        except (urllib.error.URLError, OSError, ValueError, EOFError) as exc:
            errors.append(exc)
        finally:
            for tmp in temps:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
    checksum_errors = [e for e in errors if isinstance(e, ChecksumError)]
    if checksum_errors:
        raise checksum_errors[-1]
    reasons = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
    raise DownloadError(f"could not download {', '.join(r.path for r in raws)} from {', '.join(urls)} ({reasons})")


def download_files(spec: DatasetSpec, raws: Sequence[RawFile], root: str | Path | None = None, *,
                   timeout: float = DEFAULT_TIMEOUT, progress: bool = True) -> None:
    """Download the given raw files of ``spec`` into ``<root>/<name>/raw`` and verify their sha256.

    Files sharing the same URLs (members of one archive) are fetched with one download.
    Raises :class:`DownloadError` (network, read-only root, no URL) or :class:`ChecksumError`; in both
    cases nothing is left under the data root.
    """
    raw_dir = spec.raw_dir(root)
    if _offline():
        raise DownloadError(f"downloads are disabled ({ENV_OFFLINE} is set)")
    if not is_writable(raw_dir):
        raise DownloadError(f"the data root {data_root(root)} is read-only, so nothing can be downloaded into it; "
                            f"choose a writable root (GFLKIT_DATA=..., root=..., --root ...)")
    no_url = [r.path for r in raws if not r.urls]
    if no_url:
        raise DownloadError(f"no download URL for {', '.join(no_url)}: {spec.obtain or spec.source}")
    by_source: dict[tuple[str, ...], list[RawFile]] = {}
    for raw in raws:
        by_source.setdefault(raw.urls, []).append(raw)
    for urls, group in by_source.items():
        _download_source(urls, group, raw_dir, timeout=timeout, progress=progress)


def require_files(spec: DatasetSpec, root: str | Path | None = None, *, download: bool = True,
                  group: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Path]:
    """Make sure the raw files of ``spec`` (optionally one variant) exist; returns ``{relpath: path}``.

    Missing files are downloaded when ``download`` is True, they have a URL and the network answers;
    otherwise ONE :class:`DatasetNotFoundError` names the dataset, the missing files, the root and the fix.
    Presence only: hashes are checked by :func:`cached_conversion` before anything is parsed.
    """
    root_path = data_root(root)
    raws = spec.files_in(group)
    raw_dir = spec.raw_dir(root_path)
    missing = [r for r in raws if not (raw_dir / r.path).is_file()]
    if missing:
        reason = ""
        if download and all(r.downloadable for r in missing):
            try:
                download_files(spec, missing, root_path, timeout=timeout)
            except DownloadError as exc:
                reason = str(exc)
            missing = [r for r in missing if not (raw_dir / r.path).is_file()]
        if missing:
            raise DatasetNotFoundError.for_files(spec, root_path, missing, reason)
    return {r.path: raw_dir / r.path for r in raws}


def fetch_dataset(name: str, root: str | Path | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                  progress: bool = True) -> list[FileStatus]:
    """Download the missing (downloadable) raw files of ``name`` and verify every file fully.

    Raises :class:`DownloadError` / :class:`ChecksumError` when a download fails; files that cannot be
    downloaded (LEAF json) stay missing and show up as such in the returned statuses.
    """
    spec = get_spec(name)
    root_path = data_root(root)
    raw_dir = spec.raw_dir(root_path)
    missing = [r for r in spec.files if r.downloadable and not (raw_dir / r.path).is_file()]
    if missing:
        download_files(spec, missing, root_path, timeout=timeout, progress=progress)
    return verify_dataset(name, root_path, full=True)
