"""pip install ./sdk/python works offline, and the wheel carries the
package with its py.typed."""

import os
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wheel_and_offline_install(tmp_path):
    sys.path.insert(0, os.path.join(HERE, "build_backend"))
    try:
        import sluice_build
    finally:
        sys.path.pop(0)
    name = sluice_build.build_wheel(str(tmp_path))
    assert name == "sluice-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        names = set(z.namelist())
        meta = z.read("sluice-0.1.0.dist-info/METADATA").decode()
    for m in ("__init__", "client", "aio", "errors", "models", "webhook",
              "_http", "_calls"):
        assert "sluice/%s.py" % m in names
    assert "sluice/py.typed" in names and "Requires-Python: >=3.11" in meta
    sd = sluice_build.build_sdist(str(tmp_path))
    assert sd == "sluice-0.1.0.tar.gz"
    # pip, with no index at all, in its isolated build environment
    r = subprocess.run([sys.executable, "-m", "pip", "--version"],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip("no pip for %s (apt-get install python3-pip)" %
                    sys.executable)
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index",
                        "--disable-pip-version-check", "--no-cache-dir",
                        "--target", str(target), HERE],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PIP_NO_INPUT="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "sluice" / "py.typed").exists()
    r = subprocess.run([sys.executable, "-c", "import sluice, sys; "
                        "print(sluice.__version__, sluice.__file__)"],
                       capture_output=True, text=True,
                       env={"PYTHONPATH": str(target), "PATH": "/usr/bin"})
    assert r.stdout.startswith("0.1.0 " + str(target)), r.stdout + r.stderr


def test_types_strict(tmp_path):
    """The package's annotations hold under mypy --strict (Debian:
    python3-mypy)."""
    r = subprocess.run([sys.executable, "-c", "import mypy"],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip("no mypy for %s (apt-get install python3-mypy)" %
                    sys.executable)
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict",
                        "--python-version", "3.11", "--cache-dir",
                        str(tmp_path / "cache"),
                        os.path.join(HERE, "src", "sluice")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
