"""open_submission: a folder or a zip in, a clean world-readable package layout out, never an exception.

Every input is built in tmp_path; each test is one kind of submission a cohort really sends (or an
attack on the grader), and checks both what is copied and the problem the student reads.
"""

import hashlib
import io
import os
import stat
import zipfile
from pathlib import Path

import pytest

from autograder.grading import intake as submission
from autograder.grading.intake import open_submission

PACKAGES = ["resource_accounting", "flash_attention"]
LAYOUT = {"resource_accounting/__init__.py": "", "resource_accounting/flops.py": "X = 1\n"}


def make_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def make_zip(path: Path, files: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return path


def copied(sub) -> list[str]:
    return sorted(p.relative_to(sub.root).as_posix() for p in sub.root.rglob("*") if p.is_file())


def problems(sub) -> str:
    return "\n".join(sub.problems)


def test_a_folder_is_copied_world_readable_with_its_packages(tmp_path):
    source = make_tree(tmp_path / "alice", LAYOUT)
    (source / "resource_accounting" / "flops.py").chmod(0o600)
    sub = open_submission(source, tmp_path / "stage", PACKAGES)
    assert (sub.name, sub.root, sub.packages, sub.problems) == ("alice", tmp_path / "stage" / "submission",
                                                              ["resource_accounting"], [])
    assert copied(sub) == sorted(LAYOUT)
    assert stat.S_IMODE((sub.root / "resource_accounting" / "flops.py").stat().st_mode) == 0o644
    assert stat.S_IMODE((sub.root / "resource_accounting").stat().st_mode) == 0o755


def test_the_digest_covers_paths_and_bytes_and_agrees_for_a_folder_and_its_zip(tmp_path):
    folder = open_submission(make_tree(tmp_path / "a", LAYOUT), tmp_path / "s1", PACKAGES)
    archive = open_submission(make_zip(tmp_path / "a.zip", LAYOUT), tmp_path / "s2", PACKAGES)
    changed = open_submission(make_tree(tmp_path / "b", {**LAYOUT, "resource_accounting/flops.py": "X = 2\n"}),
                              tmp_path / "s3", PACKAGES)
    assert folder.digest == archive.digest != changed.digest
    assert archive.name == "a" and len(folder.digest) == len(hashlib.sha256().hexdigest())


def test_a_missing_path_is_a_problem_not_an_exception(tmp_path):
    sub = open_submission(tmp_path / "nobody.zip", tmp_path / "stage", PACKAGES)
    assert sub.packages == [] and sub.name == "nobody"
    assert "nobody.zip does not exist" in problems(sub)


def test_an_empty_folder_is_reported(tmp_path):
    (tmp_path / "empty" / ".git").mkdir(parents=True)
    sub = open_submission(tmp_path / "empty", tmp_path / "stage", PACKAGES)
    assert sub.packages == [] and "empty is empty" in problems(sub)


@pytest.mark.parametrize("prefix", ["submission/", "my-repo/", "assignments/", "my-repo/assignments/"])
def test_the_packages_are_found_in_a_single_top_folder_or_assignments(tmp_path, prefix):
    files = {prefix + rel: text for rel, text in LAYOUT.items()}
    sub = open_submission(make_zip(tmp_path / "bob.zip", {**files, "README.md": "hi"}), tmp_path / "stage", PACKAGES)
    assert sub.packages == ["resource_accounting"] and copied(sub) == sorted(LAYOUT)
    assert f"found in {prefix} of bob.zip" in problems(sub)


def test_a_wrong_layout_lists_what_was_found_and_the_expected_layout(tmp_path):
    sub = open_submission(make_zip(tmp_path / "c.zip", {"flops.py": "", "memory.py": "", "notes/a.txt": ""}),
                          tmp_path / "stage", PACKAGES)
    message = problems(sub)
    assert sub.packages == [] and copied(sub) == []
    assert "found flops.py, memory.py, notes/" in message
    assert "expected resource_accounting/" in message and "flash_attention/" in message


def test_python_files_outside_the_packages_are_named_as_not_copied(tmp_path):
    sub = open_submission(make_tree(tmp_path / "d", {**LAYOUT, "helpers.py": ""}), tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
    assert "not copied, outside the package folders: helpers.py" in problems(sub)


@pytest.mark.parametrize("name", ["../evil.py", "/tmp/evil.py", "C:/evil.py", "resource_accounting\\evil.py",
                                  "resource_accounting/../../evil.py"])
def test_zip_entries_that_escape_the_folder_are_rejected_and_named(tmp_path, name):
    sub = open_submission(make_zip(tmp_path / "e.zip", {**LAYOUT, name: "pwned"}), tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
    assert f"{name!r} in the zip" in problems(sub) and "rejected" in problems(sub)
    assert not [p for p in tmp_path.rglob("evil.py")]


def test_a_symlink_in_a_zip_is_rejected(tmp_path):
    path = make_zip(tmp_path / "f.zip", LAYOUT)
    link = zipfile.ZipInfo("resource_accounting/secret.py")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(link, "/etc/passwd")
    sub = open_submission(path, tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
    assert "resource_accounting/secret.py in the zip is a symlink" in problems(sub)


def test_symlinks_in_a_folder_are_not_followed(tmp_path):
    outside = make_tree(tmp_path / "outside", {"secret.py": "TOKEN = 1\n"})
    source = make_tree(tmp_path / "g", LAYOUT)
    (source / "resource_accounting" / "secret.py").symlink_to(outside / "secret.py")
    (source / "resource_accounting" / "linked").symlink_to(outside, target_is_directory=True)
    sub = open_submission(source, tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
    assert "resource_accounting/secret.py: a symlink, not followed" in problems(sub)
    assert "resource_accounting/linked: a symlink" in problems(sub)


def test_a_file_over_the_size_limit_is_rejected(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_FILE_BYTES", 1000)
    source = make_tree(tmp_path / "h", {**LAYOUT, "resource_accounting/weights.json": b"x" * 1001})
    sub = open_submission(source, tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
    assert "resource_accounting/weights.json: larger than" in problems(sub)


def test_a_submission_over_the_total_limit_stops_with_a_problem(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_TOTAL_BYTES", 1000)
    files = {f"resource_accounting/part{i}.py": "#" * 400 for i in range(3)}
    sub = open_submission(make_tree(tmp_path / "i", files), tmp_path / "stage", PACKAGES)
    assert sub.packages == [] and copied(sub) == []
    assert "the package folders hold more than" in problems(sub)


def test_a_submission_with_too_many_files_stops_with_a_problem(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_FILES", 5)
    files = {f"resource_accounting/m{i}.py": "" for i in range(6)}
    for source in (make_tree(tmp_path / "j", files), make_zip(tmp_path / "j.zip", files)):
        sub = open_submission(source, tmp_path / "stage", PACKAGES)
        assert sub.packages == [] and "more than 5 files" in problems(sub)


def test_a_zip_bomb_is_stopped_by_the_bytes_read_not_only_the_declared_size(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "k.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in LAYOUT.items():
            archive.writestr(name, text)
        archive.writestr("resource_accounting/bomb.py", b"\0" * 2**20)   # declares 1 MiB
        archive.writestr("resource_accounting/liar.py", b"\0" * 2**20)
        archive.getinfo("resource_accounting/liar.py").file_size = 10     # declares 10 bytes
    sub = open_submission(path, tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
    assert "resource_accounting/bomb.py: larger than" in problems(sub)
    assert "resource_accounting/liar.py: " in problems(sub)


def test_reading_stops_at_the_limit_when_a_file_lies_about_its_size(monkeypatch):
    monkeypatch.setattr(submission, "MAX_FILE_BYTES", 1000)
    found: list[str] = []
    entry = submission.Entry(Path("a.py"), 10, lambda: io.BytesIO(b"x" * 10**6))
    assert submission._read(entry, found) is None and "a.py: larger than" in found[0]


def test_a_python_file_that_is_not_utf8_is_not_copied(tmp_path):
    source = make_tree(tmp_path / "l", {**LAYOUT, "resource_accounting/memory.py": b"x = 1\ns = '\xe9t\xe9'\n",
                                        "resource_accounting/latin.py": b"# -*- coding: latin-1 -*-\ns = '\xe9'\n"})
    sub = open_submission(source, tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
    assert sub.problems == ["resource_accounting/latin.py: not copied, its coding line declares iso-8859-1: only "
                            "UTF-8 source is graded; save it as UTF-8 and remove the coding line",
                            "resource_accounting/memory.py line 2: not UTF-8 text (byte 0xe9), not copied: save it "
                            "as UTF-8"]


def test_caches_and_version_control_are_skipped(tmp_path):
    junk = {"resource_accounting/__pycache__/flops.cpython-311.pyc": b"\0",
            ".git/config": "", "resource_accounting/.ipynb_checkpoints/x.py": "", "__MACOSX/._x": "",
            "resource_accounting/.DS_Store": ""}
    for source in (make_tree(tmp_path / "m", {**LAYOUT, **junk}), make_zip(tmp_path / "m.zip", {**LAYOUT, **junk})):
        sub = open_submission(source, tmp_path / "stage", PACKAGES)
        assert copied(sub) == sorted(LAYOUT) and sub.problems == []


def test_a_file_named_zip_that_is_not_a_zip_is_reported(tmp_path):
    (tmp_path / "n.zip").write_text("resource_accounting/flops.py")
    sub = open_submission(tmp_path / "n.zip", tmp_path / "stage", PACKAGES)
    assert sub.packages == [] and "n.zip is not a zip archive" in problems(sub)


def test_a_corrupt_zip_is_reported(tmp_path):
    data = make_zip(tmp_path / "ok.zip", LAYOUT).read_bytes()
    directory = data.rindex(b"PK\x01\x02")   # a central directory entry: break its signature
    (tmp_path / "o.zip").write_bytes(data[:directory] + b"XX" + data[directory + 2:])
    sub = open_submission(tmp_path / "o.zip", tmp_path / "stage", PACKAGES)
    assert sub.packages == [] and "o.zip is a corrupt zip" in problems(sub)


def test_a_zip_member_with_corrupt_data_is_named(tmp_path):
    path = tmp_path / "p.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, text in {**LAYOUT, "resource_accounting/memory.py": "Y = 'a fairly long line'\n"}.items():
            archive.writestr(name, text)
    data = path.read_bytes()
    spot = data.index(b"a fairly long line")
    path.write_bytes(data[:spot] + b"A" + data[spot + 1:])
    sub = open_submission(path, tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
    assert "resource_accounting/memory.py: cannot be read (Bad CRC-32" in problems(sub)


def test_a_second_opening_keeps_the_folder_itself(tmp_path):
    """A worker booted early sees the submission folder through a bind mount of that very inode:
    replacing the folder instead of emptying it would leave the worker looking at the old one."""
    first = open_submission(make_tree(tmp_path / "r", LAYOUT), tmp_path / "stage", PACKAGES)
    inode = first.root.stat().st_ino
    second = open_submission(make_tree(tmp_path / "s", LAYOUT), tmp_path / "stage", PACKAGES)
    assert second.root.stat().st_ino == inode and copied(second) == sorted(LAYOUT)


def test_a_second_opening_replaces_the_previous_copy(tmp_path):
    open_submission(make_tree(tmp_path / "r", {**LAYOUT, "resource_accounting/old.py": ""}), tmp_path / "stage",
                    PACKAGES)
    os.remove(tmp_path / "r" / "resource_accounting" / "old.py")
    sub = open_submission(tmp_path / "r", tmp_path / "stage", PACKAGES)
    assert copied(sub) == sorted(LAYOUT)
