"""The persistent compilation cache trusts its owner only (docs/security.md, "Compilation cache"): entries are
machine code that a hit runs, so a directory or an entry someone else can write is refused, an entry of another
program under this program's name is a miss, and no bad path or bad entry (a NUL byte, thousands of levels, a FIFO,
a symbolic link, a huge file, a file cut after its magic line) raises or hangs: each is one warning and a normal
compile. Cheap f32[4] programs, in this process (ember.clear_caches() stands for "the next process"), except the
FIFO, which runs in a subprocess with a timeout."""
import os
import stat
import warnings

import numpy as np
import pytest

import ember
from ember._runtime import compile_cache
from ember._runtime.compile_cache import CompilationCacheWarning
from subproc import check_python

X = np.arange(4, dtype=np.float32)
OTHER_UID = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(compile_cache, "_warned", set())


def run(directory, scale):
    """x * scale + 1 jitted with the cache in directory, as a new process would (nothing compiled in memory):
    (result, the cache warnings given, hits)."""
    ember.clear_caches()
    hits = compile_cache.stats["hits"]
    with ember.config.override(compilation_cache_dir=str(directory), persistent_cache_min_compile_time_secs=0):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            out = np.asarray(ember.jit(lambda x: x * scale + 1.0)(X)).tolist()
    return out, [str(w.message) for w in record if issubclass(w.category, CompilationCacheWarning)], \
        compile_cache.stats["hits"] - hits


def private_dir(path):
    path.mkdir(mode=0o700)
    os.chmod(path, 0o700)
    return path


def compiled(tmp_path, name, scale):
    """The key and payload of x * scale + 1's entry (compiled into a directory of its own)."""
    directory = private_dir(tmp_path / name)
    run(directory, scale)
    [entry] = os.listdir(directory)
    return entry[:-len(compile_cache.SUFFIX)], (directory / entry).read_bytes()[compile_cache._HEADER:]


def plant(directory, key, data):
    path = directory / (key + compile_cache.SUFFIX)
    path.write_bytes(data)
    os.chmod(path, 0o600)
    return path


@as_root
def test_a_planted_entry_is_loaded_only_from_a_directory_only_its_owner_can_write(tmp_path):
    key_a, _ = compiled(tmp_path, "a", 3.0)
    key_b, payload_b = compiled(tmp_path, "b", 5.0)
    own_a = [1.0, 4.0, 7.0, 10.0]
    other_b = [1.0, 6.0, 11.0, 16.0]
    forged = compile_cache.encode_entry(key_a, payload_b)  # B's code under A's key, checksum recomputed

    control = private_dir(tmp_path / "mine")  # the owner is trusted: the forged entry is potent
    plant(control, key_a, forged)
    assert run(control, 3.0) == (other_b, [], 1)

    shared = tmp_path / "shared"  # the attack: a 0777 directory, the entry owned by someone else
    shared.mkdir()
    os.chmod(shared, 0o777)
    os.chown(plant(shared, key_a, forged), OTHER_UID, OTHER_UID)
    out, messages, hits = run(shared, 3.0)
    assert out == own_a and hits == 0 and len(messages) == 1
    assert "refusing the cache directory" in messages[0] and "writable by group and others (mode 0777)" in messages[0]
    assert run(shared, 3.0)[1] == []  # one warning per directory and process
    assert os.stat(shared / (key_a + compile_cache.SUFFIX)).st_uid == OTHER_UID  # nothing written there

    foreign = private_dir(tmp_path / "foreign")  # a 0700 directory of another user
    plant(foreign, key_a, forged)
    os.chown(foreign, OTHER_UID, OTHER_UID)
    out, messages, hits = run(foreign, 3.0)
    assert out == own_a and hits == 0 and len(messages) == 1 and f"owned by uid {OTHER_UID}" in messages[0]

    group = private_dir(tmp_path / "group")
    plant(group, key_a, forged)
    os.chmod(group, 0o770)
    assert "writable by group (mode 0770)" in run(group, 3.0)[1][0]


def test_another_programs_entry_under_this_programs_name_is_a_miss(tmp_path):
    key_a, _ = compiled(tmp_path, "a", 3.0)
    key_b, payload_b = compiled(tmp_path, "b", 5.0)
    swapped = private_dir(tmp_path / "swapped")  # B's valid entry (its header names B's key), renamed to A's
    plant(swapped, key_a, compile_cache.encode_entry(key_b, payload_b))
    out, messages, hits = run(swapped, 3.0)
    assert out == [1.0, 4.0, 7.0, 10.0] and hits == 0
    assert len(messages) == 1 and "holds another program's executable" in messages[0]
    assert compile_cache._read(str(swapped), key_a) is not None  # rewritten as A's own entry
    assert run(swapped, 3.0) == ([1.0, 4.0, 7.0, 10.0], [], 1)


def entry_in(tmp_path):
    directory = private_dir(tmp_path / "cache")
    compile_cache._write(str(directory), "k", b"payload" * 10)
    assert compile_cache._read(str(directory), "k") == b"payload" * 10
    return directory, directory / ("k" + compile_cache.SUFFIX)


def refused(directory, key="k"):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert compile_cache._read(str(directory), key) is None
    assert [w.category for w in record] == [CompilationCacheWarning], record
    return str(record[0].message)


@pytest.mark.parametrize("case", ["other owner", "group-writable", "others-writable", "symlink", "directory"])
def test_entries_are_refused_unless_regular_files_only_the_owner_can_write(tmp_path, case):
    directory, entry = entry_in(tmp_path)
    if case == "other owner":
        if os.geteuid() != 0:
            pytest.skip("needs root to give a file to another user")
        os.chown(entry, OTHER_UID, OTHER_UID)
        expected = f"is owned by uid {OTHER_UID}"
    elif case == "group-writable":
        os.chmod(entry, 0o620)
        expected = "writable by group (mode 0620)"
    elif case == "others-writable":
        os.chmod(entry, 0o646)
        expected = "writable by others (mode 0646)"
    elif case == "symlink":  # a valid entry elsewhere, linked in
        os.replace(entry, tmp_path / "elsewhere")
        os.symlink(tmp_path / "elsewhere", entry)
        expected = "is a symbolic link"
    else:
        entry.unlink()
        entry.mkdir()
        expected = "not a regular file (a directory)"
    message = refused(directory)
    assert "refusing the entry" in message and expected in message
    with warnings.catch_warnings(record=True) as record:  # once per kind, directory and process
        warnings.simplefilter("always")
        assert compile_cache._read(str(directory), "k") is None
    assert record == []


def test_an_oversized_entry_is_refused_without_reading_it(tmp_path, monkeypatch):
    directory, entry = entry_in(tmp_path)
    with open(entry, "r+b") as f:  # 512 MiB (sparse) behind a valid-looking header
        f.truncate(512 << 20)
    read = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: read.append(n) or real_read(fd, n))
    assert "more than an entry may be" in refused(directory) and read == []
    monkeypatch.setattr(os, "read", real_read)

    monkeypatch.setattr(compile_cache, "MAX_ENTRY_BYTES", 1000)  # the limit, patched low
    compile_cache._write(str(directory), "small", bytes(1000 - compile_cache._HEADER))
    compile_cache._write(str(directory), "big", bytes(1001 - compile_cache._HEADER))  # too large: not stored
    assert compile_cache._read(str(directory), "small") is not None
    assert not (directory / "big.ember-xla").exists()


def test_an_entry_cut_after_its_magic_line_is_a_miss(tmp_path):
    key_a, _ = compiled(tmp_path, "a", 3.0)
    directory = tmp_path / "a"
    with open(directory / (key_a + compile_cache.SUFFIX), "r+b") as f:
        f.truncate(len(compile_cache.MAGIC))
    out, messages, hits = run(directory, 3.0)
    assert out == [1.0, 4.0, 7.0, 10.0] and hits == 0
    assert len(messages) == 1 and "not a valid entry" in messages[0]
    assert run(directory, 3.0) == ([1.0, 4.0, 7.0, 10.0], [], 1)  # stored again


@pytest.mark.parametrize("case", ["NUL byte", "3000 levels"])
def test_a_bad_path_compiles_with_one_warning(tmp_path, case):
    directory = f"{tmp_path}/cache\0x" if case == "NUL byte" else str(tmp_path) + "/d" * 3000
    out, messages, hits = run(directory, 3.0)
    assert out == [1.0, 4.0, 7.0, 10.0] and hits == 0
    assert len(messages) == 1 and "cannot use" in messages[0], messages
    assert run(directory, 7.0)[1] == []  # once per directory and process


def test_a_symlink_to_a_directory_of_ones_own_is_followed_and_its_target_checked(tmp_path):
    target = private_dir(tmp_path / "target")
    link = tmp_path / "link"
    link.symlink_to(target)
    compile_cache._write(str(link), "k", b"code")
    assert compile_cache._read(str(link), "k") == b"code" and os.listdir(target) == ["k.ember-xla"]
    os.chmod(target, 0o777)
    assert "writable by group and others (mode 0777)" in refused(link)


def test_writes_create_private_files_and_are_fsynced_before_and_after_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        real_fsync(fd)

    def replace(*args, **kwargs):
        events.append("rename")
        real_replace(*args, **kwargs)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    directory = tmp_path / "new" / "cache"
    compile_cache._write(str(directory), "k", b"code")
    assert events == ["fsync file", "rename", "fsync directory"]
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(directory / "k.ember-xla").st_mode) == 0o600
    assert os.listdir(directory) == ["k.ember-xla"]  # no temporary file left


FIFO = """
    import os, warnings, numpy as np, ember
    from ember._runtime import compile_cache
    x = np.arange(4, dtype=np.float32)
    directory = {directory!r}
    os.mkdir(directory, 0o700)
    def run():
        ember.clear_caches()
        with ember.config.override(compilation_cache_dir=directory, persistent_cache_min_compile_time_secs=0):
            return np.asarray(ember.jit(lambda x: x * 3.0 + 1.0)(x)).tolist()
    run()
    [name] = os.listdir(directory)
    path = os.path.join(directory, name)
    def fifo():  # no writer: a blocking open or read would hang
        os.unlink(path)
        os.mkfifo(path, 0o600)
    fifo()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        print("RESULT", run(), compile_cache.stats["hits"], [str(w.message) for w in record])
    fifo()  # and a FIFO put in place between the lstat and the open: the open does not block, fstat refuses it
    real, calls = compile_cache._entry_problem, []
    def after_the_lstat(info):
        calls.append(info)
        return None if len(calls) == 1 else real(info)
    compile_cache._entry_problem = after_the_lstat
    compile_cache._warned.clear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        print("SWAPPED", compile_cache._read(directory, name[:-len(compile_cache.SUFFIX)]), len(calls),
              [str(w.message) for w in record])
"""


def test_a_fifo_entry_does_not_hang(tmp_path):
    out = check_python(FIFO.format(directory=str(tmp_path / "cache")), timeout=60)
    result = next(line for line in out.splitlines() if line.startswith("RESULT"))
    swapped = next(line for line in out.splitlines() if line.startswith("SWAPPED"))
    assert result.startswith("RESULT [1.0, 4.0, 7.0, 10.0] 0 [") and result.count("is not a regular file (a FIFO)") == 1
    assert swapped.startswith("SWAPPED None 2 [") and swapped.count("is not a regular file (a FIFO)") == 1
