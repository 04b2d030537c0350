"""CelebA under LEAF's federated protocol (one client per celebrity, task: Smiling), as used by FedCG.

Protocol (Caldas et al., "LEAF", arXiv:1812.01097; FedCG, Sec. 4.1), as LEAF's
``data/celeba/preprocess/metadata_to_json.py`` builds it: every celebrity of ``identity_CelebA.txt`` is a
client, celebrities with fewer than 5 images are ignored, and the label is the ``Smiling`` column of
``list_attr_celeba.txt`` mapped to ``(v + 1) / 2`` (1 → 1, -1 → 0). Here the 5-image rule counts the
images *present* in the image folder used (all 202,599 with the official folder), so a partial image folder
gives the clients that are complete enough, and the offline copy gives 104 clients with 554 images.

Images, as LEAF's model reads them (``models/celeba/cnn.py``, ``_load_image``; read in
TalwalkarLab/leaf at commit f69e081): ``PIL.Image.open`` on the aligned JPEG, ``.resize((84, 84))`` —
the full 178×218 image squashed to 84×84, no crop — with Pillow's *default* filter, then
``.convert("RGB")``, then ``np.array``: ``uint8`` values **0..255, not scaled to [0, 1]** (``process_x``
feeds them to a ``float32`` placeholder unchanged; ``models/model.py`` and ``models/utils/model_utils.py``
do no scaling either). Pillow's default filter for RGB images is BICUBIC since Pillow 7.0 (2020) and was
NEAREST before; this loader resizes with an explicit filter, ``resample="bicubic"`` by default (what
LEAF's code does with any current Pillow; ``"nearest"`` gives LEAF's 2018-era behaviour), in the same
order (resize, then convert to RGB). Output ``x`` is ``float32`` ``(N, 3, 84, 84)`` (channels first) with
LEAF's 0..255 values by default (``scale="leaf"``); ``scale="unit"`` divides by 255 for models that
expect [0, 1] like the other image datasets.

Raw files (``<root>/celeba/raw/``):

- ``list_attr_celeba.txt.gz`` and ``identity_CelebA.txt.gz``: ``gzip -9 -n`` of the official files,
  pinned by sha256. The plain official ``list_attr_celeba.txt`` / ``identity_CelebA.txt`` are accepted
  instead when the ``.gz`` file is absent (pinned by the official files' sha256, :data:`PLAIN_TEXT`), so a
  user can drop in the files downloaded from the CelebA site. Official format: CRLF lines; the attribute
  file starts with the image count, then the 40 attribute names, then ``NNNNNN.jpg`` + 40 values in
  {-1, 1}; the identity file has ``NNNNNN.jpg <celebrity id>`` lines.
- images, from the first folder that exists (``images="auto"``; or forced with ``images="original"`` /
  ``"half_resolution"``):

  1. ``img_align_celeba/`` — the official aligned 178×218 JPEGs (``img_align_celeba.zip`` from the
     official Google Drive). 202,599 files cannot reasonably be pinned one by one and CelebA publishes
     no per-file hashes (only the zip's md5), so these are **not hash-checked**; the tensor cache is keyed
     by the names, sizes and mtimes of the ``.jpg`` files instead. ``info["images"] == "original"``.
  2. ``img_align_celeba_89x109/`` — a **derived** fallback: 554 half-resolution (89×109) re-encoded JPEGs
     of the 104 celebrities that have at least 5 images among 000001-010000 (see the dataset's
     PROVENANCE.md). Not CelebA's files: pixels differ from the originals (half resolution, JPEG
     re-encoding) before being resized to 84×84 in the same way, so results on them are smoke tests,
     not paper numbers. Each file is pinned by sha256 (``celeba_89x109.sha256`` beside this module,
     copied from the PROVENANCE appendix). ``info["images"] == "half_resolution"``; no warning is
     emitted.

  The registry lists the annotation files (group ``annotations``) and the 554 pinned images (group
  ``half_resolution``), so ``gflkit data verify celeba`` checks them; a root holding only the official
  folder shows the 554 as missing there, which does not stop the loader.

Output :class:`~gflkit.data.dataset.SampleDataset`: ``y`` ``int64`` smiling (2 classes); ``user`` = client
index into ``user_names`` (celebrity ids as strings, in order of first appearance in the identity file);
samples grouped by client, each client's images in file order. ``is_test`` is all False: LEAF's
per-celebrity sample split (``-t sample``) does not apply, because FedCG holds out whole clients (the
experiment's partitioner decides). ``info``: ``"images"`` (which folder), ``"attributes"`` (``(N, 40)``
bool, True where the file says 1), ``"attribute_names"`` (the 40 names of the file's 2nd line),
``"image_names"``, ``"target"`` (``"Smiling"``), ``"scale"``, ``"resample"``. The cache stores ``uint8``
pixels (about 4.3 GB for all of CelebA); decoding happens once per image folder and filter.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from gflkit.data.dataset import SampleDataset
from gflkit.data.conversion import cached_conversion
from gflkit.data.download import require_files
from gflkit.data.errors import DatasetNotFoundError
from gflkit.data.registry import DatasetSpec, RawFile, register, reject_options

SOURCE = "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html"
GOOGLE_DRIVE = "https://drive.google.com/drive/folders/0B7EVK8r0v71pWEZsZE9oNnFzTm8"
ATTRIBUTES = "list_attr_celeba.txt.gz"
IDENTITIES = "identity_CelebA.txt.gz"
ORIGINAL_DIR = "img_align_celeba"
HALF_DIR = "img_align_celeba_89x109"
IMAGE_FOLDERS = {"original": ORIGINAL_DIR, "half_resolution": HALF_DIR}
TARGET = "Smiling"
MIN_IMAGES = 5
IMAGE_SIZE = 84
NUM_ATTRIBUTES = 40
SCALES = ("leaf", "unit")
RESAMPLE = ("bicubic", "nearest")
OBTAIN = (
    "from the official CelebA site " + SOURCE + " (its Google Drive: " + GOOGLE_DRIVE + "), download "
    "Anno/list_attr_celeba.txt, Anno/identity_CelebA.txt (may have to be requested from the authors) and "
    "Img/img_align_celeba.zip (Align&Cropped images, md5 00d2c5bc6d35e252742224ab0c1e8fcb); put the two text "
    "files into <root>/celeba/raw/ (plain, or gzip -9 -n'd to .txt.gz, the pinned form) and unzip the zip there "
    "so that <root>/celeba/raw/img_align_celeba/000001.jpg exists. The shared offline copy "
    "(GFLKIT_DATA=../shared/datasets) holds both text files and a derived half-resolution image subset "
    "(img_align_celeba_89x109/, 104 celebrities)."
)

# (gzip'd path, sha256, size) and the plain official file each one may be replaced by — from celeba/PROVENANCE.md
_ANNOTATIONS = (
    (ATTRIBUTES, "60e4f178f34e53533bae65f38caa929d7d22245d6f364516554c7828d745c37a", 1801631),
    (IDENTITIES, "a13c1788e0230fdba9142533eb8fc282889038ff5c08d48a9aae5848a9201c77", 949172),
)
#: the plain official files accepted when the ``.gz`` one is absent, ``{gz path: (path, sha256, size)}``
PLAIN_TEXT: dict[str, tuple[str, str, int]] = {
    ATTRIBUTES: ("list_attr_celeba.txt", "f0e5da289d5ccf75ffe8811132694922b60f2af59256ed362afa03fefba324d0", 26721026),
    IDENTITIES: ("identity_CelebA.txt", "c6143857c3e2630ac2da9f782e9c1232e5e59be993a9d44e8a7916c78a6158c0", 3424458),
}
_HALF_PINS = "celeba_89x109.sha256"


def _half_resolution_files() -> tuple[RawFile, ...]:
    """The pinned half-resolution images, read from the resource file beside this module."""
    text = resources.files(__package__).joinpath(_HALF_PINS).read_text(encoding="utf-8")
    files = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, size, sha = line.split()
            files.append(RawFile(f"{HALF_DIR}/{name}", sha, int(size), group="half_resolution"))
    return tuple(files)


# ------------------------------------------------------------------------------------------- parsing
def _read_text(path: Path) -> list[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="ascii", newline=None) as handle:  # CRLF → "\n"
        return handle.read().splitlines()


def read_attributes(path: Path, images: Sequence[str] | None = None) -> tuple[list[str], dict[str, np.ndarray]]:
    """``(names, {image: values})`` of ``list_attr_celeba.txt`` (plain or gzip), values in {-1, 1} (``int8``).

    Only the rows of ``images`` are parsed (all rows when None; a listed image without a row is an error);
    the image count of line 1 is checked against the rows in every case.
    """
    lines = _read_text(path)
    if len(lines) < 2 or not lines[0].strip().isdigit():
        raise ValueError(f"{path} is not a CelebA attribute file (line 1 must be the image count)")
    names = lines[1].split()
    if TARGET not in names:
        raise ValueError(f"{path}: no {TARGET!r} attribute among {names}")
    rows: dict[str, tuple[int, str]] = {}
    for number, line in enumerate(lines[2:], start=3):
        parts = line.split(None, 1)
        if parts:
            rows[parts[0]] = (number, parts[1] if len(parts) > 1 else "")
    if len(rows) != int(lines[0]):
        raise ValueError(f"{path}: line 1 announces {int(lines[0])} images but {len(rows)} are listed")
    out: dict[str, np.ndarray] = {}
    for image in rows if images is None else images:
        if image not in rows:
            raise ValueError(f"{path} has no row for {image}: the attribute and identity files do not belong "
                             f"together")
        number, rest = rows[image]
        fields = rest.split()
        if len(fields) != len(names) or not set(fields) <= {"-1", "1"}:
            raise ValueError(f"{path}, line {number}: expected {len(names)} values in {{-1, 1}}, got {rest!r}")
        out[image] = np.array(fields, dtype=np.int8)
    return names, out


def read_identities(path: Path) -> dict[str, str]:
    """``{image: celebrity id}`` of ``identity_CelebA.txt`` (plain or gzip), in file order."""
    out: dict[str, str] = {}
    for number, line in enumerate(_read_text(path), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise ValueError(f"{path}, line {number}: expected '<image> <celebrity id>', got {line!r}")
        out[fields[0]] = fields[1]
    return out


def load_image(path: Path, resample: str = "bicubic") -> np.ndarray:
    """One image as LEAF loads it: resized to 84×84, then RGB; ``uint8`` ``(3, 84, 84)``."""
    from PIL import Image

    filters = {"bicubic": Image.Resampling.BICUBIC, "nearest": Image.Resampling.NEAREST}
    with Image.open(path) as image:
        resized = image.resize((IMAGE_SIZE, IMAGE_SIZE), resample=filters[resample]).convert("RGB")
    return np.asarray(resized, dtype=np.uint8).transpose(2, 0, 1)


def _jpg_names(folder: Path) -> list[str]:
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if e.name.lower().endswith(".jpg") and e.is_file())


def _convert(paths: dict[str, Path], folder: Path, resample: str) -> dict[str, Any]:
    annotation = {Path(rel).name.split(".")[0]: path for rel, path in paths.items() if "/" not in rel}
    identities = read_identities(annotation["identity_CelebA"])
    present = set(_jpg_names(folder))
    by_celebrity: dict[str, list[str]] = {}
    for image, celebrity in identities.items():
        if image in present:
            by_celebrity.setdefault(celebrity, []).append(image)
    users = [c for c, images in by_celebrity.items() if len(images) >= MIN_IMAGES]
    image_names = [image for c in users for image in by_celebrity[c]]
    attribute_names, attributes = read_attributes(annotation["list_attr_celeba"], image_names)
    x = np.zeros((len(image_names), 3, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    for i, image in enumerate(image_names):
        x[i] = load_image(folder / image, resample)
    values = np.stack([attributes[image] for image in image_names]) if image_names else \
        np.zeros((0, len(attribute_names)), np.int8)
    target = attribute_names.index(TARGET)
    user = np.repeat(np.arange(len(users), dtype=np.int64), [len(by_celebrity[c]) for c in users])
    return {"x": torch.from_numpy(x), "y": torch.from_numpy((values[:, target] == 1).astype(np.int64)),
            "user": torch.from_numpy(user), "user_names": users, "attributes": torch.from_numpy(values == 1),
            "attribute_names": attribute_names, "image_names": image_names}


# -------------------------------------------------------------------------------------------- loader
def _annotation_files(spec: DatasetSpec, root: Path) -> list[RawFile]:
    """The pinned ``.txt.gz`` files, or the plain official ``.txt`` where only that is present."""
    raw_dir = spec.raw_dir(root)
    chosen, missing = [], []
    for raw in (f for f in spec.files if f.path in (ATTRIBUTES, IDENTITIES)):
        plain = PLAIN_TEXT[raw.path]
        if (raw_dir / raw.path).is_file():
            chosen.append(raw)
        elif (raw_dir / plain[0]).is_file():
            chosen.append(RawFile(plain[0], plain[1], plain[2], group=raw.group))
        else:
            missing.append(raw)
    if missing:  # the registry's own message: the files, the root, the fix and how to obtain them
        require_files(dataclasses.replace(spec, files=tuple(missing)), root, download=False)
    return chosen


def _choose_images(spec: DatasetSpec, root: Path, images: str) -> str:
    raw_dir = spec.raw_dir(root)
    if images == "auto":
        if (raw_dir / ORIGINAL_DIR).is_dir() and _jpg_names(raw_dir / ORIGINAL_DIR):
            return "original"
        if (raw_dir / HALF_DIR).is_dir():
            return "half_resolution"
    elif images == "half_resolution" or (raw_dir / ORIGINAL_DIR).is_dir():
        return images
    raise DatasetNotFoundError(
        f"dataset 'celeba': no image folder found under data root '{root}': expected the official aligned "
        f"images in {raw_dir / ORIGINAL_DIR}/ (000001.jpg ...)"
        + ("" if images == "original" else f" or the derived half-resolution copy in {raw_dir / HALF_DIR}/")
        + f". Fix: set GFLKIT_DATA to a folder holding celeba/raw/{ORIGINAL_DIR}/, or pass root=... "
          f"(CLI: --root ...); source: {SOURCE}. These files cannot be downloaded from a single URL: {OBTAIN}")


def _folder_fingerprint(folder: Path) -> str:
    """A digest of the ``.jpg`` names, sizes and mtimes of an unpinned image folder (the cache key)."""
    digest = hashlib.sha256()
    for name in _jpg_names(folder):
        st = (folder / name).stat()
        digest.update(f"{name} {st.st_size} {st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def domain_ids(attributes: Tensor, names: Sequence[str], chosen: Sequence[str]) -> Tensor:
    r"""Each image's oracle domain from binary attributes: :math:`\sum_i 2^i a_i` over the ``chosen``
    attribute names in order (FedCG's 5 attributes give 32 domains, Sec. 4.2.1)."""
    unknown = [name for name in chosen if name not in names]
    if unknown:
        raise ValueError(f"celeba: unknown attribute(s) {unknown} for domain_channel; CelebA has {list(names)}")
    columns = attributes[:, [list(names).index(name) for name in chosen]].long()
    return (columns * (2 ** torch.arange(len(chosen)))).sum(dim=1)


def load_celeba(spec: DatasetSpec, root: Path, *, download: bool = True, images: str = "auto",
                scale: str = "leaf", resample: str = "bicubic", domain_channel: Sequence[str] = (),
                **options: Any) -> SampleDataset:
    """LEAF CelebA: ``(N, 3, 84, 84)`` ``float32`` (0..255 as LEAF, or [0, 1] with ``scale="unit"``),
    smiling labels, one user per celebrity with at least 5 present images, ``is_test`` all False.

    Options: ``images`` (``"auto"``, ``"original"``, ``"half_resolution"``), ``scale`` (``"leaf"`` or
    ``"unit"``), ``resample`` (``"bicubic"`` or ``"nearest"``), ``domain_channel`` (attribute names: a
    fourth, constant channel holding each image's oracle domain, :func:`domain_ids`, which FedCG's network
    with ``domains="oracle"`` reads and removes — how a per-image domain reaches the model through the
    engine's ``(input, target)`` batches; FedCG's Table 3). ``download`` has no effect: nothing of CelebA
    can be downloaded from a single URL.
    """
    reject_options(spec, options, ("images", "scale", "resample", "domain_channel"))
    for option, value, allowed in (("images", images, ("auto", *IMAGE_FOLDERS)), ("scale", scale, SCALES),
                                   ("resample", resample, RESAMPLE)):
        if value not in allowed:
            raise ValueError(f"celeba: unknown {option} {value!r}; choose one of {list(allowed)}")
    annotations = _annotation_files(spec, root)
    kind = _choose_images(spec, root, images)
    folder = spec.raw_dir(root) / IMAGE_FOLDERS[kind]
    if kind == "half_resolution":
        pinned = tuple(f for f in spec.files if f.path.startswith(HALF_DIR + "/"))
        require_files(dataclasses.replace(spec, files=pinned), root, download=False)
        raws: Sequence[RawFile] = [*annotations, *pinned]
        key: dict[str, Any] = {"resample": resample}
    else:  # too many files to pin: hash the annotations, key the cache by the folder's listing
        raws = annotations
        key = {"resample": resample, "folder": _folder_fingerprint(folder)}
    data = cached_conversion(spec, root, raws, lambda paths: _convert(paths, folder, resample),
                             variant=kind, options=key)
    x = data["x"].to(torch.float32)
    if scale == "unit":
        x = x / 255.0
    if domain_channel:
        domains = domain_ids(data["attributes"], list(data["attribute_names"]), domain_channel)
        x = torch.cat([x, domains.to(x.dtype).view(-1, 1, 1, 1).expand(-1, 1, *x.shape[2:])], dim=1)
    n = len(x)
    return SampleDataset(spec.name, x, data["y"], 2, torch.zeros(n, dtype=torch.bool), data["user"],
                         list(data["user_names"]),
                         info={"images": kind, "target": TARGET, "classes": "0 not smiling, 1 smiling",
                               "attributes": data["attributes"], "attribute_names": list(data["attribute_names"]),
                               "image_names": list(data["image_names"]),
                               "scale": "0..255 (LEAF's values)" if scale == "leaf" else "[0, 1] (divided by 255)",
                               "resample": resample, "domain_channel": list(domain_channel)})


SPEC = register(DatasetSpec(
    name="celeba",
    description="CelebA, LEAF protocol (FedCG): one client per celebrity with >= 5 images, Smiling, 3x84x84",
    source=SOURCE,
    files=tuple(RawFile(path, sha, size, group="annotations") for path, sha, size in _ANNOTATIONS)
    + _half_resolution_files(),
    loader=load_celeba,
    obtain=OBTAIN,
    license="CelebA: non-commercial research and educational use only (as commonly stated); LEAF code BSD-2-Clause",
))
