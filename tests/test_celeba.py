"""CelebA (LEAF protocol) on canonical-format fixtures, and (``integration``) on the real files under ``GFLKIT_DATA``."""
from __future__ import annotations

import gzip
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import gflkit.data.loaders.celeba as celeba
from data_fixtures import corrupt_one_byte, spec_for
from gflkit.data import ChecksumError, DatasetNotFoundError, get_spec, load_dataset, registered, verify_dataset

REAL_ROOT = os.environ.get("GFLKIT_DATA")  # read at import: the autouse fixture hides it from the fixture tests

# the official 40 attribute names, in the file's order ("Smiling" is column 31)
NAMES = ("5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose Black_Hair "
         "Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee Gray_Hair Heavy_Makeup "
         "High_Cheekbones Male Mouth_Slightly_Open Mustache Narrow_Eyes No_Beard Oval_Face Pale_Skin Pointy_Nose "
         "Receding_Hairline Rosy_Cheeks Sideburns Smiling Straight_Hair Wavy_Hair Wearing_Earrings Wearing_Hat "
         "Wearing_Lipstick Wearing_Necklace Wearing_Necktie Young").split()
SMILING = NAMES.index("Smiling")

# image -> celebrity, in file order: "10" has 5 images, "20" 6, "30" only 3 (dropped), "40" 5 listed but
# 000014.jpg is not in the image folder (4 present: dropped); celebrities interleave as in the real file
IDENTITY = {
    "000001.jpg": "10", "000002.jpg": "20", "000003.jpg": "10", "000004.jpg": "30", "000005.jpg": "20",
    "000006.jpg": "40", "000007.jpg": "10", "000008.jpg": "20", "000009.jpg": "30", "000010.jpg": "40",
    "000011.jpg": "10", "000012.jpg": "20", "000013.jpg": "40", "000014.jpg": "40", "000015.jpg": "10",
    "000016.jpg": "20", "000017.jpg": "30", "000018.jpg": "40", "000019.jpg": "20",
}
ABSENT = {"000014.jpg"}
GRAYSCALE = "000003.jpg"  # a one-channel JPEG: LEAF's .convert("RGB") makes three equal channels
EXPECTED_USERS = ["10", "20"]
EXPECTED_IMAGES = ["000001.jpg", "000003.jpg", "000007.jpg", "000011.jpg", "000015.jpg",
                   "000002.jpg", "000005.jpg", "000008.jpg", "000012.jpg", "000016.jpg", "000019.jpg"]
ANNOTATIONS = [celeba.ATTRIBUTES, celeba.IDENTITIES]


pytestmark = pytest.mark.usefixtures("isolated_data_env")


def _crlf(lines: list[str]) -> bytes:
    return "".join(line + "\r\n" for line in lines).encode("ascii")


def write_annotations(raw: Path, values: np.ndarray, plain: bool = False) -> None:
    """``list_attr_celeba.txt`` and ``identity_CelebA.txt`` in the official layout (CRLF, count line, names
    line with a trailing space, values right-aligned in width 2), gzip'd (``gzip -9 -n``) unless ``plain``."""
    images = list(IDENTITY)
    attr = [str(len(images)), " ".join(NAMES) + " "]
    attr += [f"{image} " + " ".join(f"{v:2d}" for v in row) for image, row in zip(images, values)]
    ident = [f"{image} {celebrity}" for image, celebrity in IDENTITY.items()]
    raw.mkdir(parents=True, exist_ok=True)
    for name, lines in (("list_attr_celeba.txt", attr), ("identity_CelebA.txt", ident)):
        if plain:
            (raw / name).write_bytes(_crlf(lines))
        else:
            (raw / f"{name}.gz").write_bytes(gzip.compress(_crlf(lines), compresslevel=9, mtime=0))


def write_images(folder: Path, size: tuple[int, int] = (36, 44), seed: int = 0) -> None:
    """Small JPEGs (width × height) named like CelebA's, plus a file that is not an image of the list."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for image in IDENTITY:
        if image in ABSENT:
            continue
        pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
        picture = Image.fromarray(pixels[..., 0], "L") if image == GRAYSCALE else Image.fromarray(pixels, "RGB")
        picture.save(folder / image, quality=90)
    (folder / "Thumbs.db").write_bytes(b"not an image")


def make_celeba(root: Path, folders: tuple[str, ...] = (celeba.ORIGINAL_DIR,), seed: int = 0):
    """The annotation files and images in ``folders``; returns (spec re-pinned to the fixture, values).

    The spec pins the fixture's annotation files and, for the half-resolution folder, its images (the
    production pins are those of the real files: ``spec_for`` replaces them, as for every fixture)."""
    rng = np.random.default_rng(seed)
    values = rng.choice(np.array([-1, 1], dtype=np.int8), size=(len(IDENTITY), len(NAMES)))
    raw = root / "celeba" / "raw"
    write_annotations(raw, values)
    relpaths = list(ANNOTATIONS)
    for folder in folders:
        write_images(raw / folder, seed=seed + len(folder))
        if folder == celeba.HALF_DIR:
            relpaths += [f"{folder}/{image}" for image in IDENTITY if image not in ABSENT]
    return spec_for("celeba", root, relpaths), values


def leaf_load_image(path: Path) -> np.ndarray:
    """LEAF's ``_load_image`` (models/celeba/cnn.py): resize to 84×84 with Pillow's default filter, then RGB."""
    with Image.open(path) as image:
        return np.array(image.resize((84, 84)).convert("RGB"))


def _expected_values(values: np.ndarray) -> np.ndarray:
    rows = {image: i for i, image in enumerate(IDENTITY)}
    return values[[rows[image] for image in EXPECTED_IMAGES]]


# ------------------------------------------------------------------------------------------- fixtures
def test_celeba_fixture_follows_leaf(tmp_path):
    root = tmp_path / "root"
    spec, values = make_celeba(root)
    with registered(spec):
        data = load_dataset("celeba", root)
    assert data.user_names == EXPECTED_USERS  # "30" (3 images) and "40" (4 present) are dropped
    assert data.info["image_names"] == EXPECTED_IMAGES
    assert data.user.tolist() == [0] * 5 + [1] * 6 and len(data) == 11
    assert data.x.dtype == torch.float32 and data.input_shape == (3, 84, 84) and data.num_classes == 2
    assert not data.is_test.any() and data.is_test.dtype == torch.bool
    expected = _expected_values(values)
    assert data.y.dtype == torch.int64 and data.y.tolist() == ((expected[:, SMILING] + 1) // 2).tolist()
    assert data.info["attribute_names"] == NAMES and data.info["target"] == "Smiling"
    assert data.info["attributes"].shape == (11, 40) and data.info["attributes"].dtype == torch.bool
    assert torch.equal(data.info["attributes"], torch.from_numpy(expected == 1))
    assert data.info["images"] == "original"
    # LEAF's values: 0..255, channels first, exactly what LEAF's _load_image gives with this Pillow
    assert float(data.x.min()) >= 0 and float(data.x.max()) <= 255 and float(data.x.max()) > 1
    folder = root / "celeba" / "raw" / celeba.ORIGINAL_DIR
    leaf = np.stack([leaf_load_image(folder / image) for image in EXPECTED_IMAGES]).transpose(0, 3, 1, 2)
    assert torch.equal(data.x, torch.from_numpy(leaf.astype(np.float32)))
    grey = data.x[EXPECTED_IMAGES.index(GRAYSCALE)]
    assert torch.equal(grey[0], grey[1]) and torch.equal(grey[0], grey[2])


def test_scale_resample_and_options(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_celeba(root)
    with registered(spec):
        leaf = load_dataset("celeba", root)
        unit = load_dataset("celeba", root, scale="unit")
        nearest = load_dataset("celeba", root, resample="nearest")
        with pytest.raises(ValueError, match="scale"):
            load_dataset("celeba", root, scale="imagenet")
        with pytest.raises(ValueError, match="resample"):
            load_dataset("celeba", root, resample="lanczos")
        with pytest.raises(ValueError, match="images"):
            load_dataset("celeba", root, images="full")
        with pytest.raises(TypeError, match="accepted options: images, scale, resample"):
            load_dataset("celeba", root, size=64)
    assert torch.allclose(unit.x, leaf.x / 255) and float(unit.x.max()) <= 1.0
    assert unit.info["scale"] != leaf.info["scale"]
    with registered(spec):
        oracle = load_dataset("celeba", root, scale="unit", domain_channel=("Attractive", "Wavy_Hair"))
    codes = celeba.domain_ids(unit.info["attributes"], unit.info["attribute_names"], ["Attractive", "Wavy_Hair"])
    assert torch.equal(oracle.x[:, :3], unit.x) and oracle.input_shape == (4, 84, 84)
    assert torch.equal(oracle.x[:, 3], codes.float().view(-1, 1, 1).expand(-1, 84, 84))
    folder = root / "celeba" / "raw" / celeba.ORIGINAL_DIR
    with Image.open(folder / EXPECTED_IMAGES[0]) as image:
        near = np.asarray(image.resize((84, 84), Image.Resampling.NEAREST).convert("RGB")).transpose(2, 0, 1)
    assert torch.equal(nearest.x[0], torch.from_numpy(near.astype(np.float32)))
    assert not torch.equal(nearest.x, leaf.x) and nearest.info["resample"] == "nearest"


def test_domain_channel_codes_the_chosen_attributes():
    names = ["Attractive", "Smiling", "Wavy_Hair"]
    attributes = torch.tensor([[1, 0, 0], [0, 1, 1], [1, 1, 1], [0, 0, 0]], dtype=torch.bool)
    assert celeba.domain_ids(attributes, names, ["Attractive", "Wavy_Hair"]).tolist() == [1, 2, 3, 0]
    with pytest.raises(ValueError, match="unknown attribute\\(s\\) \\['Bald'\\]"):
        celeba.domain_ids(attributes, names, ["Bald"])


def test_half_resolution_folder(tmp_path):
    root = tmp_path / "root"
    spec, values = make_celeba(root, folders=(celeba.HALF_DIR,))
    with registered(spec):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the derived folder is stated in info, not warned about
            data = load_dataset("celeba", root)
    assert data.info["images"] == "half_resolution"
    assert data.user_names == EXPECTED_USERS and data.info["image_names"] == EXPECTED_IMAGES
    assert data.y.tolist() == ((_expected_values(values)[:, SMILING] + 1) // 2).tolist()
    folder = root / "celeba" / "raw" / celeba.HALF_DIR
    assert torch.equal(data.x[3], torch.from_numpy(leaf_load_image(folder / EXPECTED_IMAGES[3]).transpose(2, 0, 1)
                                                    .astype(np.float32)))


def test_original_folder_is_preferred_and_caches_differ(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = make_celeba(root, folders=(celeba.ORIGINAL_DIR, celeba.HALF_DIR))
    calls = []
    real = celeba._convert
    monkeypatch.setattr(celeba, "_convert", lambda paths, folder, resample: calls.append(folder.name)
                        or real(paths, folder, resample))
    with registered(spec):
        auto = load_dataset("celeba", root)
        half = load_dataset("celeba", root, images="half_resolution")
        original = load_dataset("celeba", root, images="original")
        load_dataset("celeba", root, images="half_resolution")
    assert auto.info["images"] == original.info["images"] == "original" and half.info["images"] == "half_resolution"
    assert not torch.equal(auto.x, half.x) and torch.equal(auto.x, original.x)  # other pixels (other seed)
    assert torch.equal(auto.y, half.y)
    assert calls == [celeba.ORIGINAL_DIR, celeba.HALF_DIR]  # one conversion per folder, then the cache
    assert len(list((tmp_path / "cache" / "celeba").glob("celeba-*.pt"))) == 2


def test_second_load_uses_cache_and_new_images_invalidate_it(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = make_celeba(root)
    with registered(spec):
        first = load_dataset("celeba", root)
        monkeypatch.setattr(celeba, "_convert", lambda *a: pytest.fail("decoded the images again"))
        second = load_dataset("celeba", root)
        assert torch.equal(first.x, second.x) and torch.equal(first.y, second.y)
        assert second.info["image_names"] == first.info["image_names"]
        monkeypatch.undo()
        monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
        # the unpinned original folder: the cache is keyed by its listing, so a new image is seen
        Image.new("RGB", (36, 44), (10, 20, 30)).save(root / "celeba" / "raw" / celeba.ORIGINAL_DIR / "000014.jpg")
        third = load_dataset("celeba", root)
    assert third.user_names == ["10", "20", "40"] and len(third) == 16


def test_plain_text_annotations_are_accepted(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, values = make_celeba(root)
    raw = root / "celeba" / "raw"
    with registered(spec):
        gz = load_dataset("celeba", root)
    for name in ANNOTATIONS:
        (raw / name).unlink()
    write_annotations(raw, values, plain=True)
    with registered(spec):
        # the production pins are those of the official files: the fixture's plain files do not match
        with pytest.raises(ChecksumError, match="list_attr_celeba.txt|identity_CelebA.txt"):
            load_dataset("celeba", root)
        from gflkit.data import sha256_file

        pins = {gz_name: (plain, sha256_file(raw / plain), (raw / plain).stat().st_size)
                for gz_name, (plain, _, _) in celeba.PLAIN_TEXT.items()}
        monkeypatch.setattr(celeba, "PLAIN_TEXT", pins)
        plain = load_dataset("celeba", root)
    assert torch.equal(plain.x, gz.x) and torch.equal(plain.y, gz.y)
    assert torch.equal(plain.info["attributes"], gz.info["attributes"])


def test_missing_files_name_the_path(tmp_path):
    root = tmp_path / "root"
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("celeba", root)
    message = str(info.value)
    assert str(root / "celeba" / "raw") in message and "list_attr_celeba.txt.gz" in message
    assert "identity_CelebA.txt.gz" in message and "mmlab.ie.cuhk.edu.hk/projects/CelebA.html" in message
    assert "img_align_celeba.zip" in message

    spec, values = make_celeba(root, folders=())
    with registered(spec):
        with pytest.raises(DatasetNotFoundError) as info:
            load_dataset("celeba", root)
        message = str(info.value)
        assert str(root / "celeba" / "raw" / "img_align_celeba") in message and "img_align_celeba.zip" in message
        assert "drive.google.com" in message and "mmlab.ie.cuhk.edu.hk" in message
        with pytest.raises(DatasetNotFoundError, match="img_align_celeba/"):
            load_dataset("celeba", root, images="original")
    spec, _ = make_celeba(root, folders=(celeba.HALF_DIR,))
    (root / "celeba" / "raw" / celeba.HALF_DIR / "000019.jpg").unlink()
    with registered(spec), pytest.raises(DatasetNotFoundError, match="img_align_celeba_89x109/000019.jpg"):
        load_dataset("celeba", root)


def test_half_resolution_images_are_verified(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_celeba(root, folders=(celeba.HALF_DIR,))
    corrupt_one_byte(root / "celeba" / "raw" / celeba.HALF_DIR / "000007.jpg")
    with registered(spec), pytest.raises(ChecksumError, match="000007.jpg"):
        load_dataset("celeba", root)


def test_attribute_file_is_checked(tmp_path):
    path = tmp_path / "list_attr_celeba.txt"
    path.write_bytes(_crlf(["2", " ".join(NAMES), "000001.jpg " + " 1" * 40]))
    with pytest.raises(ValueError, match="announces 2 images but 1"):
        celeba.read_attributes(path)
    path.write_bytes(_crlf(["1", " ".join(NAMES), "000001.jpg " + " 1" * 39 + " 0"]))
    with pytest.raises(ValueError, match="line 3"):
        celeba.read_attributes(path)
    path.write_bytes(_crlf(["1", " ".join(NAMES), "000001.jpg " + " -1" * 40]))
    names, rows = celeba.read_attributes(path)
    assert names == NAMES and rows["000001.jpg"].tolist() == [-1] * 40
    with pytest.raises(ValueError, match="no row for 000002.jpg"):
        celeba.read_attributes(path, ["000002.jpg"])


# --------------------------------------------------------------------------------------- production pins
def test_production_pins():
    spec = get_spec("celeba")
    assert spec.groups == ("annotations", "half_resolution")
    assert [f.path for f in spec.files_in("annotations")] == ANNOTATIONS
    half = spec.files_in("half_resolution")
    assert len(half) == 554 and all(f.path.startswith(celeba.HALF_DIR + "/") and not f.urls for f in half)
    assert sum(f.size for f in half) == 1545630  # the folder's total in PROVENANCE.md
    for f in spec.files:
        assert re.fullmatch("[0-9a-f]{64}", f.sha256)


def test_pins_match_provenance():
    provenance = Path(REAL_ROOT or "/nonexistent") / "celeba" / "PROVENANCE.md"
    if not provenance.is_file():
        pytest.skip(f"{provenance} not available (set GFLKIT_DATA to the shared datasets folder)")
    text = provenance.read_text()
    spec = get_spec("celeba")
    for raw in spec.files_in("annotations"):
        row = next(line for line in text.splitlines()  # the Files table, not the summary table
                   if line.startswith(f"| raw/{raw.path} |") and re.search("[0-9a-f]{64}", line))
        assert raw.sha256 in row and f"| {raw.size} |" in row
    for plain, sha, size in celeba.PLAIN_TEXT.values():
        row = next(line for line in text.splitlines() if f"(gunzipped) {plain} |" in line)
        assert sha in row and f"| {size} |" in row
    appendix = {m[1]: (int(m[2]), m[3]) for m in re.finditer(r"^(\d{6}\.jpg) (\d+) ([0-9a-f]{64}) celeb=\d+$",
                                                             text, re.MULTILINE)}
    assert {f.path.split("/")[1]: (f.size, f.sha256) for f in spec.files_in("half_resolution")} == appendix


# ------------------------------------------------------------------------------------- real data (CI)
@pytest.mark.integration
def test_real_celeba(tmp_path_factory):
    if not REAL_ROOT:
        pytest.skip("GFLKIT_DATA is not set: real-data tests need a root holding the raw files "
                    "(CI uses ../shared/datasets)")
    root = Path(REAL_ROOT)
    if not (root / "celeba" / "raw" / celeba.ATTRIBUTES).is_file():
        pytest.skip(f"real celeba not found under {root}/celeba/raw (needs {celeba.ATTRIBUTES})")
    if (root / "celeba" / "raw" / celeba.ORIGINAL_DIR).is_dir():
        pytest.skip("this root holds the official image folder: the checks below are those of the 554-image copy")
    assert all(s.state == "present" for s in verify_dataset("celeba", root))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GFLKIT_CACHE", str(tmp_path_factory.mktemp("gflkit-celeba-cache")))
        data = load_dataset("celeba", root, download=False)
    assert data.info["images"] == "half_resolution"
    assert len(data.user_names) == 104 and len(data) == 554 and data.input_shape == (3, 84, 84)
    assert int(torch.bincount(data.user).min()) >= 5 and not data.is_test.any()
    assert data.info["attribute_names"][31] == "Smiling" and len(data.info["attribute_names"]) == 40
    assert torch.equal(data.y.bool(), data.info["attributes"][:, 31])
    assert 0 < float(data.y.float().mean()) < 1 and float(data.x.max()) == 255.0
    provenance = root / "celeba" / "PROVENANCE.md"
    if provenance.is_file():  # celebrity of every image, as the PROVENANCE appendix lists it
        celeb = dict(re.findall(r"^(\d{6}\.jpg) \d+ [0-9a-f]{64} celeb=(\d+)$", provenance.read_text(), re.MULTILINE))
        assert [data.user_names[u] for u in data.user.tolist()] == [celeb[i] for i in data.info["image_names"]]
