"""Files: write, read (ranges), list (glob, recursive), edit, remove, and
their errors."""

import pytest

import sluice


def test_write_read(sandbox):
    assert sandbox.write("a/b/c.txt", "héllo") == 6
    assert sandbox.read("a/b/c.txt") == "héllo".encode()
    assert sandbox.read_text("/workspace/a/b/c.txt") == "héllo"
    data = bytes(range(256)) * 40
    sandbox.write("bin.dat", data)
    assert sandbox.read("bin.dat") == data
    assert sandbox.read("bin.dat", offset=10, length=5) == data[10:15]
    assert sandbox.read("bin.dat", offset=10000) == data[10000:]
    # owned by the sandbox user: its commands can change it
    assert sandbox.exec("echo more >> a/b/c.txt && cat a/b/c.txt"
                        ).stdout == "héllo" + "more\n"
    # names that need quoting
    sandbox.write("with space/ü?#%.txt", b"q")
    assert sandbox.read("with space/ü?#%.txt") == b"q"
    assert [e.path for e in sandbox.list("ü*", path="with space")] == [
        "with space/ü?#%.txt"]


def test_list(sandbox):
    for p in ("x.txt", "y.txt", "z.py", "d/inner.txt"):
        sandbox.write(p, b"1")
    top = sandbox.list()
    assert {e.path for e in top} >= {"x.txt", "y.txt", "z.py", "d"}
    assert {e.path: e.type for e in top}["d"] == "dir"
    assert sorted(sandbox.list("*.txt").paths) == ["x.txt", "y.txt"]
    assert sorted(sandbox.list("*.txt", recursive=True).paths) == [
        "d/inner.txt", "x.txt", "y.txt"]
    e = [e for e in top if e.path == "x.txt"][0]
    assert (e.type, e.size, e.mode) == ("file", 1, "0644") and e.mtime > 0
    assert sandbox.list(path="d").paths == ["d/inner.txt"]
    assert top.truncated is False
    sandbox.exec("ln -s x.txt link")
    link = [e for e in sandbox.list("link")][0]
    assert (link.type, link.target) == ("symlink", "x.txt")


def test_edit_remove(sandbox):
    sandbox.write("f.py", "a = 1\nb = 2\nb = 2\n")
    sandbox.edit("f.py", "a = 1", "a = 10")
    assert sandbox.read_text("f.py") == "a = 10\nb = 2\nb = 2\n"
    with pytest.raises(sluice.ConflictError) as ei:
        sandbox.edit("f.py", "b = 2", "b = 3")      # not unique
    assert ei.value.code == "conflict"
    with pytest.raises(sluice.ConflictError):
        sandbox.edit("f.py", "nothing", "x")        # missing
    sandbox.remove("f.py")
    with pytest.raises(sluice.NotFoundError) as ei:
        sandbox.read("f.py")
    assert not isinstance(ei.value, sluice.SandboxNotFoundError)
    sandbox.write("dir/keep", b"")
    with pytest.raises(sluice.ConflictError):
        sandbox.remove("dir")                       # not empty
    sandbox.remove("dir/keep")
    sandbox.remove("dir")
    assert "dir" not in sandbox.list().paths


def test_file_errors(sandbox):
    big = b"x" * ((1 << 20) + 1)        # max_file_bytes is 1 MiB here
    with pytest.raises(sluice.TooLargeError) as ei:
        sandbox.write("big", big)
    assert ei.value.status == 413
    sandbox.exec("head -c 1200000 /dev/zero > big")
    with pytest.raises(sluice.TooLargeError):
        sandbox.read("big")
    assert sandbox.read("big", offset=1199990) == b"\0" * 10
    sandbox.exec("ln -s /etc/shadow shadow")
    with pytest.raises(sluice.BadRequestError):
        sandbox.read("shadow")
    # ".." stays inside the workspace
    with pytest.raises(sluice.NotFoundError):
        sandbox.read("../../etc/passwd")
    with pytest.raises(ValueError):
        sandbox.read("")


def test_tar(sandbox, tmp_path):
    """put_tar / get_tar: a tree in one call and back; a hostile entry
    refused with nothing written."""
    import hashlib
    import io
    import os
    import tarfile
    src = tmp_path / "src"
    (src / "sub" / "deep").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "sub" / "a.txt").write_bytes(b"alpha\n")
    big = os.urandom(1 << 20)
    (src / "sub" / "deep" / "big.bin").write_bytes(big)
    os.symlink("sub/a.txt", src / "link")
    r = sandbox.put_tar(src, dir="skills")
    assert isinstance(r, sluice.TarResult)
    assert (r.path, r.files, r.links, r.bytes) == ("skills", 2, 1,
                                                   len(big) + 6)
    assert r.dirs == 3
    assert sandbox.read("skills/sub/a.txt") == b"alpha\n"
    assert sandbox.exec("sha256sum skills/sub/deep/big.bin").stdout.split()[
        0] == hashlib.sha256(big).hexdigest()
    t = tarfile.open(fileobj=io.BytesIO(sandbox.get_tar("skills")))
    m = {i.name.rstrip("/"): i for i in t.getmembers()}
    assert {"empty", "sub", "sub/a.txt", "sub/deep/big.bin", "link"} <= set(m)
    assert m["link"].issym() and m["link"].linkname == "sub/a.txt"
    assert hashlib.sha256(t.extractfile("sub/deep/big.bin").read()
                          ).hexdigest() == hashlib.sha256(big).hexdigest()
    # the whole workspace by default
    names = tarfile.open(fileobj=io.BytesIO(sandbox.get_tar())).getnames()
    assert "skills/sub/a.txt" in names
    # hostile: refused, the entry named, nothing written
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as tw:
        ok = tarfile.TarInfo("fine.txt")
        ok.size = 1
        tw.addfile(ok, io.BytesIO(b"f"))
        bad = tarfile.TarInfo("../escape.txt")
        bad.size = 1
        tw.addfile(bad, io.BytesIO(b"e"))
    with pytest.raises(sluice.BadRequestError) as ei:
        sandbox.put_tar(b.getvalue(), dir="h")
    assert "escape" in str(ei.value)
    with pytest.raises(sluice.NotFoundError):
        sandbox.read("h/fine.txt")
    with pytest.raises(sluice.NotFoundError):
        sandbox.get_tar("nosuch")
    with pytest.raises(sluice.InvalidArgumentError):
        sandbox.put_tar(42)  # type: ignore[arg-type]
