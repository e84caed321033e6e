"""A PEP 517 build backend (with PEP 660 editable installs) for the
sluice SDK, on the standard library alone.

It builds a pure-Python wheel of src/sluice and an sdist of this
directory; the metadata comes from pyproject.toml's [project] table.
"""

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(HERE, "src")
PKG = "sluice"


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _names():
    p = _project()
    return p, p["name"], p["version"]


def _metadata():
    p, name, version = _names()
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version,
             "Summary: " + p.get("description", ""),
             "Requires-Python: " + p.get("requires-python", ">=3")]
    for c in p.get("classifiers", []):
        lines.append("Classifier: " + c)
    body = ""
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _dist_info(name, version):
    return "%s-%s.dist-info" % (name.replace("-", "_"), version)


def _files():
    out = []
    for root, dirs, files in os.walk(os.path.join(SRC, PKG)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(root, f)
            out.append((os.path.relpath(full, SRC).replace(os.sep, "/"), full))
    return out


def _wheel(wheel_directory, entries):
    _, name, version = _names()
    di = _dist_info(name, version)
    fname = "%s-%s-py3-none-any.whl" % (name.replace("-", "_"), version)
    record = []

    def add(z, arc, data):
        zi = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
        zi.compress_type = zipfile.ZIP_DEFLATED
        zi.external_attr = 0o644 << 16
        z.writestr(zi, data)
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
        record.append("%s,sha256=%s,%d" % (arc, h.rstrip(b"=").decode(),
                                           len(data)))

    path = os.path.join(wheel_directory, fname)
    with zipfile.ZipFile(path, "w") as z:
        for arc, data in entries:
            add(z, arc, data)
        add(z, di + "/METADATA", _metadata().encode("utf-8"))
        add(z, di + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: sluice_build"
            b"\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        add(z, di + "/top_level.txt", (PKG + "\n").encode())
        record.append(di + "/RECORD,,")
        z.writestr(zipfile.ZipInfo(di + "/RECORD",
                                   date_time=(2020, 1, 1, 0, 0, 0)),
                   "\n".join(record) + "\n")
    return fname


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _, name, version = _names()
    di = _dist_info(name, version)
    os.makedirs(os.path.join(metadata_directory, di), exist_ok=True)
    with open(os.path.join(metadata_directory, di, "METADATA"), "w",
              encoding="utf-8") as f:
        f.write(_metadata())
    return di


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for arc, full in _files():
        with open(full, "rb") as f:
            entries.append((arc, f.read()))
    return _wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None,
                   metadata_directory=None):
    return _wheel(wheel_directory, [("_sluice_editable.pth",
                                     (SRC + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    _, name, version = _names()
    base = "%s-%s" % (name, version)
    fname = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, fname), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md",
                    "build_backend/sluice_build.py"] + [
                        "src/" + a for a, _ in _files()]:
            t.add(os.path.join(HERE, rel), arcname=base + "/" + rel)
        data = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return fname
