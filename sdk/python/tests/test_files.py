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
