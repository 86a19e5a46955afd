"""Attacks on the trusted side: what a submission can throw at the grader's own steps (opening it, the
static check, the wire, the pipes, the reports, the clean-up) rather than at the sandbox.

Each class of attack is tried in its own small form first, on the step it aims at, then a batch of
them is graded end to end: every one ends with a report of bounded size, a message that says what
is wrong, no points for what it attacks, nothing of the grader's internals in what the student
sees, and no stage folder left behind.
"""

import json
import os
import resource
import subprocess
import sys
import tracemalloc
import uuid
import zipfile
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.grading import intake as submission
from autograder.model import wire
from autograder.static import checks, source
from autograder.cohort.batch import run_batch
from autograder.grading.client import ServerPool
from autograder.grading.notebook import MAX_CELLS, read_modules
from autograder.report import write_all
from autograder.model.results import MAX_LOG_LINES, GradeReport, TestResult
from autograder.sandbox import policy
from autograder.sandbox.process import RemoteStudent, StudentError, Worker, WorkerError
from autograder.sandbox.staging import build_lib, remove_tree
from autograder.grading.intake import open_submission
from autograder.suites.resource_accounting.rules import RULES

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ["resource_accounting", "flash_attention"]
SOLUTION = ROOT / "solutions" / "resource_accounting"
STUB = ROOT / "assignments" / "resource_accounting"
EXTENSION = "flops.cpython-311-x86_64-linux-gnu.so"
ALIAS_CHAIN = "a = torch\n" + "".join(f"a = a.n{i}\n" for i in range(30))
TOO_DEEP = "x = " + "-" * 7000 + "1\n"  # deeper than Python's parser goes, whatever the recursion limit
ROT13 = b"# -*- coding: rot13 -*-\nqrs zngzhy_sybcf(z, a, c):\n    erghea 2 * z * a * c\n"
MB = 1 << 20


def tree(base: Path, files: dict[str, str | bytes]) -> Path:
    for rel, data in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return base


def package_files(source: Path, **changes: str | bytes) -> dict[str, str | bytes]:
    """The package at `source` as {"resource_accounting/<file>": text}, with `changes` by file name."""
    files = {f"resource_accounting/{p.name}": p.read_text() for p in sorted(source.glob("*.py"))}
    return files | {f"resource_accounting/{name.replace('__', '.')}": text for name, text in changes.items()}


def notebook(path: Path, cells: list[str]) -> Path:
    """A notebook of code cells, as JSON with ASCII escapes (a lone surrogate stays an escape)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c, id=f"c{i}") for i, c in enumerate(cells)])
    path.write_text(json.dumps(nb))
    return path


def module_cells(source: Path, **changes: str) -> list[str]:
    files = package_files(source, **changes)
    return [f"%%writefile {rel}\n{text}" for rel, text in files.items() if not rel.endswith("__init__.py")]


def scan(root: Path, rules=RULES, **budget) -> list[checks.Violation]:
    folders = {p: root / p for p in PACKAGES if (root / p).is_dir()}
    return checks.scan_packages(folders, {"resource_accounting": rules}, **budget)


def problems(sub) -> str:
    return "\n".join(sub.problems)


def copied(sub) -> list[str]:
    return sorted(p.relative_to(sub.root).as_posix() for p in sub.root.rglob("*") if p.is_file())


# --- 1. The static check reads what runs ------------------------------------------------------------

def test_an_extension_module_beside_a_stub_is_not_copied_and_is_noted(tmp_path):
    files = package_files(STUB) | {f"resource_accounting/{EXTENSION}": b"\x7fELF junk",
                                   "resource_accounting/helpers.pyc": b"\0", "resource_accounting/x.pth": "import os"}
    source = tree(tmp_path / "s", files)
    archive = tmp_path / "s.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for rel, data in files.items():
            z.writestr(rel, data)
    for given in (source, archive):
        sub = open_submission(given, tmp_path / "stage", PACKAGES)
        assert not [f for f in copied(sub) if not f.endswith(".py")]
        assert f"not copied, not plain source: resource_accounting/{EXTENSION}" in problems(sub)
        assert "resource_accounting/x.pth" in problems(sub)


def test_a_compiled_module_in_a_package_fails_everything_in_the_static_check(tmp_path):
    root = tree(tmp_path, package_files(SOLUTION) | {f"resource_accounting/{EXTENSION}": b"\x7fELF"})
    found = scan(root)
    assert [(v.rule, v.blocks) for v in found] == [("not source", ("*",))]
    assert checks.blocked(found, "memory.get_memory_usage") == found


def test_a_forbidden_import_in_the_other_package_is_followed(tmp_path):
    flops = (SOLUTION / "flops.py").read_text() + "\nfrom flash_attention.counting import helper\n"
    root = tree(tmp_path, package_files(SOLUTION, flops__py=flops) | {
        "flash_attention/__init__.py": "",
        "flash_attention/counting.py": "from torch.utils import flop_counter\n\ndef helper():\n"
                                       "    return flop_counter.FlopCounterMode\n"})
    found = scan(root)
    assert [(v.file, v.line, v.blocks) for v in found] == [("flash_attention/counting.py", 1, ("flops",)),
                                                         ("flash_attention/counting.py", 4, ("flops",))]
    assert "flash_attention/counting.py line 1: `from torch.utils import flop_counter`" in found[0].message
    assert checks.blocked(found, "flops.matmul_flops") and not checks.blocked(found, "memory.float_format")


def test_a_file_deeper_than_the_default_recursion_limit_is_read(tmp_path):
    deep = "import sys\nx = a" + ".b" * 3000 + "\ny = FlopCounterMode\n"
    flops = (SOLUTION / "flops.py").read_text() + "\nfrom . import deep\n"
    found = scan(tree(tmp_path, package_files(SOLUTION, flops__py=flops, deep__py=deep)))
    assert [(v.rule, v.file, v.line, v.blocks) for v in found] == [("flop counter", "deep.py", 3, ("flops",))]


def test_a_file_too_deep_to_parse_fails_every_module_that_reaches_it(tmp_path):
    flops = (SOLUTION / "flops.py").read_text() + "\nfrom .network import Block\n"
    found = scan(tree(tmp_path, package_files(SOLUTION, flops__py=flops, network__py=TOO_DEEP)))
    assert [(v.rule, v.file, v.blocks) for v in found] == [("syntax", "network.py", ("flops", "network", "training"))]
    assert "network.py: cannot be parsed" in found[0].message
    assert not checks.blocked(found, "memory.float_format")


def test_a_file_in_another_codec_fails_what_reaches_it_in_the_static_check(tmp_path):
    """rot13 text is `import autograder` to Python, and noise to a reader of UTF-8."""
    flops = (SOLUTION / "flops.py").read_text() + "\nfrom . import hidden\n"
    found = scan(tree(tmp_path, package_files(SOLUTION, flops__py=flops,
                                              hidden__py=b"# -*- coding: rot13 -*-\nvzcbeg nhgbtenqre\n")))
    assert [(v.rule, v.file, v.blocks) for v in found] == [("syntax", "hidden.py", ("flops", "hidden"))]
    assert "not UTF-8 source" in found[0].message


# --- 5. The static check's budgets --------------------------------------------------------------------

def test_a_chain_of_aliases_is_bounded_and_fails_its_module(tmp_path):
    tracemalloc.start()
    try:
        found = scan(tree(tmp_path, package_files(SOLUTION, memory__py=ALIAS_CHAIN + "import torch\n")))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(v.rule, v.file, v.blocks) for v in found] == [("syntax", "memory.py", ("memory",))]
    assert f"`a` may stand for more than {source.MAX_ALIASES} things" in found[0].message
    assert peak < 64 * MB


def test_uses_of_a_name_with_many_meanings_are_bounded_in_total(tmp_path, monkeypatch):
    """64 meanings (the most one name may have) used 20 000 times: over a lowered budget of names, the
    scan stops and fails everything rather than build them all."""
    many = "".join(f"import m{i} as a\n" for i in range(source.MAX_ALIASES)) + "a.x\n" * 20_000
    monkeypatch.setattr(source, "MAX_NAMES", 100_000)
    found = scan(tree(tmp_path, package_files(SOLUTION, memory__py=many)))
    assert [(v.rule, v.blocks) for v in found] == [("budget", ("*",))]
    assert "more than 100000 candidates" in found[0].message


def test_the_scan_has_a_deadline_and_a_source_limit(tmp_path, monkeypatch):
    root = tree(tmp_path, package_files(SOLUTION))
    late = scan(root, seconds=-1)
    assert [(v.rule, v.blocks) for v in late] == [("budget", ("*",))] and "of CPU time" in late[0].message
    monkeypatch.setattr(source, "MAX_SOURCE", 10_000)
    large = scan(root)
    assert [(v.rule, v.blocks) for v in large] == [("budget", ("*",))] and "MB of Python source" in large[0].message


# --- 4 and 5. Replies: a decoding error is never the student's, and claims are bounded ---------------

def frame(header: bytes, blob: bytes = b"") -> bytes:
    return wire.MAGIC + len(header).to_bytes(8, "big") + header + blob


def test_an_integer_too_long_to_parse_is_a_wire_error_not_a_value_error():
    digits = b"9" * 5000
    with pytest.raises(wire.WireError) as caught:
        wire.decode(frame(b'{"value": ' + digits + b', "tensors": 0}'))
    assert not isinstance(caught.value, ValueError)


def test_a_header_claiming_a_trillion_tensors_is_refused_before_anything_is_built():
    blob = wire.encode(torch.zeros(2))[len(wire.MAGIC) + 8 + len(b'{"value": {"$tensor": 0}, "tensors": 1}'):]
    tracemalloc.start()
    try:
        with pytest.raises(wire.WireError, match="tensor count"):
            wire.decode(frame(b'{"value": 1, "tensors": 1000000000000}', blob))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MB


# --- 5. Notebooks: linear reading, with limits --------------------------------------------------------

def test_a_huge_writefile_token_is_refused_without_parsing_it(tmp_path):
    files, notes = read_modules(notebook(tmp_path / "t.ipynb", ["%%writefile '" + "a" * 2 * MB + "\nx = 1\n",
                                                                "%%writefile resource_accounting/flops.py\nx = 1\n"])
                                .read_bytes(), PACKAGES)
    assert list(files) == ["resource_accounting/flops.py", "resource_accounting/__init__.py"]
    assert notes == ["cell 1: its %%writefile line is longer than 1000 characters: not graded; keep each module "
                     "cell's first line as the notebook gave it"]


def test_a_notebook_of_twenty_thousand_appending_cells_is_refused(tmp_path):
    cells = ["%%writefile -a resource_accounting/flops.py\nx = 1\n"] * 20_000
    sub = open_submission(notebook(tmp_path / "a.ipynb", cells), tmp_path / "stage", PACKAGES)
    assert sub.packages == [] and f"has 20000 cells, more than the {MAX_CELLS}" in problems(sub)


def test_appending_cells_are_joined_in_order(tmp_path):
    cells = ["%%writefile resource_accounting/flops.py\nx = 0\n"] + [
        f"%%writefile -a resource_accounting/flops.py\nx = {i}\n" for i in range(1, 1500)]
    files, _ = read_modules(notebook(tmp_path / "j.ipynb", cells).read_bytes(), PACKAGES)
    assert files["resource_accounting/flops.py"] == "".join(f"x = {i}\n" for i in range(1500)).encode()


def test_a_cell_naming_a_hundred_thousand_files_gives_one_short_problem(tmp_path):
    cells = ["%%writefile " + " ".join(f"f{i}.py" for i in range(100_000)) + "\nx = 1\n",
             "%%writefile a b c d e f g\nx = 1\n"] + module_cells(STUB)
    sub = open_submission(notebook(tmp_path / "n.ipynb", cells), tmp_path / "stage", PACKAGES)
    assert sub.problems[0].startswith("cell 1: its %%writefile line is longer than")
    assert sub.problems[1].startswith("cell 2 writes a b c d e ... (7 names), which is not a module")
    assert max(len(p) for p in sub.problems) < 1000


# --- 6. Input that used to crash the opening ----------------------------------------------------------

@pytest.mark.parametrize("cookie", [b"rot13", b"punycode", b"latin-1", b"no-such-codec"])
def test_a_coding_line_other_than_utf8_is_refused_in_folders_zips_and_notebooks(tmp_path, cookie):
    text = b"# -*- coding: " + cookie + b" -*-\n" + ROT13.partition(b"\n")[2]
    source = tree(tmp_path / "s", package_files(SOLUTION, flops__py=text))
    archive = tmp_path / "s.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("resource_accounting/flops.py", text)
        z.writestr("resource_accounting/memory.py", "x = 1\n")
    cells = [f"%%writefile resource_accounting/flops.py\n{text.decode()}", "%%writefile resource_accounting/m.py\n"]
    for given in (source, archive, notebook(tmp_path / "s.ipynb", cells)):
        sub = open_submission(given, tmp_path / "stage", PACKAGES)
        assert sub.packages == ["resource_accounting"] and "resource_accounting/flops.py" not in copied(sub)
        assert "resource_accounting/flops.py: not copied, its coding line" in problems(sub)


def test_a_lone_surrogate_in_a_cell_is_refused_with_its_line(tmp_path):
    cells = module_cells(SOLUTION, flops__py='"""Counts."""\nNAME = "\ud800"\n')
    sub = open_submission(notebook(tmp_path / "s.ipynb", cells), tmp_path / "stage", PACKAGES)
    assert "resource_accounting/flops.py" not in copied(sub) and "resource_accounting/memory.py" in copied(sub)
    assert "resource_accounting/flops.py line 2: not UTF-8 text (byte 0xed), not copied" in problems(sub)


def test_paths_deeper_than_the_limit_are_not_walked(tmp_path):
    deep = "/".join(["d"] * 60)
    sub = open_submission(tree(tmp_path / "s", package_files(SOLUTION) | {f"resource_accounting/{deep}/x.py": "1"}),
                          tmp_path / "stage", PACKAGES)
    assert "nested deeper than 32 folders" in problems(sub) and len(problems(sub)) < 1000


def test_a_folder_of_empty_folders_is_refused_at_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_FILES", 50)
    source = tree(tmp_path / "s", package_files(SOLUTION))
    for i in range(60):
        (source / "resource_accounting" / f"empty{i}").mkdir()
    sub = open_submission(source, tmp_path / "stage", PACKAGES)
    assert sub.packages == [] and "more than 50 files (or folders, or entries in one folder)" in problems(sub)


# --- 7. Reports are bounded whatever the submission says ----------------------------------------------

def test_every_student_string_of_a_report_is_capped(tmp_path):
    huge = "x" * (5 * MB)
    report = GradeReport(submission=huge, log=[huge] * 100_000)
    report.tests.append(TestResult(name=huge, assignment="a", max_points=1, status="failed", message=huge, hint=huge))
    report.tests[0].message = huge
    report.log = report.log + [huge]
    write_all(report, tmp_path / "out")
    sizes = {p.name: p.stat().st_size for p in (tmp_path / "out").iterdir()}
    assert set(sizes) == {"results.json", "feedback.md", "junit.xml", "report.json"}
    assert max(sizes.values()) < MB and len(report.log) == MAX_LOG_LINES


# --- 8. Clean-up without recursion limits -------------------------------------------------------------

def test_a_tree_fifteen_hundred_deep_with_a_locked_folder_is_removed(tmp_path):
    top = tmp_path / "scratch"
    top.mkdir()
    fd = os.open(top, os.O_DIRECTORY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_DIRECTORY, dir_fd=fd), fd
        os.close(parent)
    os.mkdir("locked", dir_fd=fd)
    os.close(os.open("locked/x", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.chmod("locked", 0o000, dir_fd=fd)
    os.close(fd)
    assert remove_tree(top) and not top.exists()


# --- 9. Hard limits below the asked ones ----------------------------------------------------------------

def test_a_worker_starts_under_a_hard_address_space_limit_below_the_asked_one(tmp_path):
    """In a process whose hard RLIMIT_AS is 12 GiB (below the 16 GiB asked), the limits are lowered to it
    and a real worker starts and answers."""
    hard = 12 << 30
    program = f"""
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, ({hard}, {hard}))
from autograder.sandbox import policy
from autograder.sandbox.process import Worker
from autograder.sandbox.staging import build_lib
base = Path(sys.argv[1])
protections = policy.detect("auto", policy.Limits(call_timeout=60, start_timeout=120))
assert protections.limits.address_space == {hard}, protections.limits
(base / "submission" / "p").mkdir(parents=True)
(base / "submission" / "p" / "__init__.py").write_text("def add(a, b):\\n    return a + b\\n")
worker = Worker(build_lib(base / "lib", []), base / "submission", base / "scratch", protections, gpu=False)
try:
    print(worker.request({{"op": "call", "target": "p:add", "args": [2, 3], "kwargs": {{}}}}, 60))
finally:
    worker.stop()
"""
    os.chmod(tmp_path, 0o755)
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "5", done.stderr[-2000:]
    assert resource.getrlimit(resource.RLIMIT_AS)[1] != hard  # only the child was limited


# --- 4 and 5 through a real worker: the pipes ----------------------------------------------------------

TRICKS = '''
import fcntl, json, os, stat, sys, time

KEEP = []

def add(a, b):
    return a + b

def _pipes(mode):
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == mode:
                yield fd
        except OSError:
            pass

def stop_reading():
    """Put a pipe nobody writes to in place of the request pipe: the worker waits on it forever."""
    read, write = os.pipe()
    KEEP.append(write)
    for fd in _pipes(os.O_RDONLY):
        if fd != read:
            KEEP.append(os.dup(fd))  # the request pipe stays open, unread
            os.dup2(read, fd)
    return True

def claim_tensors():
    header = json.dumps({"value": 1, "tensors": 10**12}).encode()
    frame = b"LLMW1" + len(header).to_bytes(8, "big") + header + b"x" * 64
    for fd in _pipes(os.O_WRONLY):
        os.write(fd, len(frame).to_bytes(8, "big") + frame)
    time.sleep(60)

def too_long():
    sys.set_int_max_str_digits(0)
    return 10 ** 5000
'''


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    base = tmp_path_factory.mktemp("pipes")
    os.chmod(base, 0o755)
    tree(base / "submission", {"tricks/__init__.py": "", "tricks/m.py": TRICKS})
    for path in [base / "submission", *(base / "submission").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    protections = policy.detect("auto", policy.Limits(call_timeout=5, start_timeout=120))
    worker = Worker(build_lib(base / "lib", []), base / "submission", base / "scratch", protections, gpu=False)
    yield RemoteStudent(worker, timeout=5)
    worker.stop()


def test_a_worker_that_stops_reading_its_requests_fails_the_call_instead_of_hanging(student):
    assert student.call("tricks.m:stop_reading") is True
    with pytest.raises(WorkerError, match="timed out"):
        student.call("tricks.m:add", torch.zeros(1 << 20), torch.zeros(1 << 20))  # 8 MB: more than a pipe holds
    assert student.call("tricks.m:add", 2, 3) == 5  # a fresh worker


def test_a_reply_claiming_a_trillion_tensors_is_a_protocol_failure(student):
    with pytest.raises(WorkerError, match="not a valid frame"):
        student.call("tricks.m:claim_tensors")


def test_a_reply_too_long_to_decode_cannot_pass_for_the_students_value_error(student):
    with pytest.raises(Exception) as caught:
        student.call("tricks.m:too_long")
    assert isinstance(caught.value, WorkerError) and not isinstance(caught.value, (ValueError, StudentError))


# --- End to end: a batch of attacks graded, reports bounded, stages gone ------------------------------

SELECT = "test_matmul_flops_is_2mnp or test_underflows_to_zero_rejects"
SCRATCH_TREE = '''
def matmul_flops(m, n, p):
    import os
    for _ in range(1500):
        os.mkdir("d")
        os.chdir("d")
    return 2 * m * n * p
'''
HUGE_INT = '''
def underflows_to_zero(value, dtype):
    import sys
    if not dtype.is_floating_point:
        raise TypeError("not a float dtype")
    sys.set_int_max_str_digits(0)
    return 10 ** 5000
'''


def attacks(base: Path) -> dict[str, Path]:
    """{name: submission}: three submissions, each attacking flops.py one way and memory.py another (the
    static check and the opening are attacked on each step above; here, that grading them ends well)."""
    flops = (SOLUTION / "flops.py").read_text()
    memory = (SOLUTION / "memory.py").read_text()
    folders = {
        "other-package+huge-int": package_files(
            SOLUTION, flops__py=flops + "\nfrom flash_attention.counting import c\n", memory__py=memory + HUGE_INT) | {
            "flash_attention/__init__.py": "",
            "flash_attention/counting.py": "from torch.utils import flop_counter as c\n"},
        "scratch-tree+rot13": package_files(SOLUTION, flops__py=flops + SCRATCH_TREE, memory__py=ROT13) | {
            f"resource_accounting/{EXTENSION}": b"\x7fELF junk"},
    }
    found = {name: tree(base / "batch" / name, files) for name, files in folders.items()}
    names = " ".join(f"resource_accounting/f{i}.py" for i in range(100_000))
    found["named-files+surrogate.ipynb"] = notebook(base / "named-files+surrogate.ipynb", [
        f"%%writefile {names}\n"] * 3 + ["%%writefile " + " ".join(["-a"] * 300) + " x y\n"] + module_cells(
        SOLUTION, memory__py=memory + '\nNAME = "\ud800"\n'))
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{name: (GradeReport, {file: bytes}) of the attacks, graded by one warm server; "_stages": the folder
    that held the stages (TMPDIR of the graders)."""
    base = tmp_path_factory.mktemp("attacks")
    subs = attacks(base)
    stages = base / f"stages-{uuid.uuid4().hex}"
    stages.mkdir()
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(stages)
    pool = ServerPool(call_timeout=10, select=SELECT, overlap=False)
    try:
        run_batch(base / "batch", base / "out", workers=1, grade_fn=pool.grade)
        for name, path in subs.items():
            if path.suffix == ".ipynb":
                write_all(pool.grade(path), base / "out" / "submissions" / path.stem)  # beside the batch's
    finally:
        pool.close()
        if saved is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = saved
    result = {}
    for name in subs:
        out = base / "out" / "submissions" / name.removesuffix(".ipynb")
        result[name] = (GradeReport.from_json((out / "report.json").read_text()),
                        {p.name: p.read_bytes() for p in out.iterdir()})
    return result | {"_stages": stages}


def test_every_attack_ends_with_a_bounded_report_and_no_grader_internals(graded):
    for name, (report, files) in ((n, r) for n, r in graded.items() if n != "_stages"):
        assert report.tests, f"{name}: no results ({report.log})"
        assert set(files) >= {"results.json", "feedback.md", "junit.xml", "report.json"}
        for file, data in files.items():
            assert len(data) < MB, f"{name}: {file} is {len(data)} bytes"
            if file in ("results.json", "feedback.md"):
                assert b"Traceback" not in data and str(ROOT).encode() not in data, f"{name}: {file}"


def test_no_stage_is_left_behind(graded):
    assert [p.name for p in graded["_stages"].iterdir() if p.name.startswith("llmsys-")] == []


def result(graded, name: str, test: str) -> TestResult:
    report = graded[name][0]
    return next(t for t in report.tests if test in t.name)


def test_a_forbidden_import_in_the_other_package_scores_nothing_when_graded(graded):
    matmul = result(graded, "other-package+huge-int", "test_matmul_flops_is_2mnp")
    assert matmul.points == 0 and "flash_attention/counting.py line 1" in matmul.message


def test_an_integer_too_long_for_the_grader_does_not_pass_a_test_expecting_value_error(graded):
    rejects = result(graded, "other-package+huge-int", "test_underflows_to_zero_rejects")
    assert rejects.points == 0 and "not a valid frame" in rejects.message


def test_a_deep_scratch_tree_keeps_its_finished_report_and_refused_files_are_named(graded):
    report = graded["scratch-tree+rot13"][0]
    assert result(graded, "scratch-tree+rot13", "test_matmul_flops_is_2mnp").status == "passed"
    assert result(graded, "scratch-tree+rot13", "test_underflows_to_zero_rejects").points == 0
    log = "\n".join(report.log)
    assert "resource_accounting/memory.py: not copied, its coding line declares rot13" in log
    assert f"not copied, not plain source: resource_accounting/{EXTENSION}" in log


def test_a_notebook_naming_many_files_with_a_lone_surrogate_has_a_short_log(graded):
    report = graded["named-files+surrogate.ipynb"][0]
    cells = [line for line in report.log if line.startswith("cell ")]
    assert len(cells) == 4 and cells[3].startswith("cell 4 writes x y, which is not a module")
    assert all(line.startswith(f"cell {i}: its %%writefile line is longer than") for i, line in enumerate(cells[:3], 1))
    assert any(line.startswith("resource_accounting/memory.py line ") and "not UTF-8 text" in line for line in report.log)
    assert result(graded, "named-files+surrogate.ipynb", "test_matmul_flops_is_2mnp").status == "passed"
    assert result(graded, "named-files+surrogate.ipynb", "test_underflows_to_zero_rejects").points == 0
