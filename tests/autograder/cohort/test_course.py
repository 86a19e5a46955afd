"""The course file's [cluster] table and the batch options that override it (no cluster needed)."""

import dataclasses
from pathlib import Path

import pytest

from autograder.cli import build_parser, cluster_options
from autograder.cohort.course import ClusterOptions, CourseError, check, load_cluster
from autograder.cohort.executors import refusal, sbatch_parameters

COURSE = """
[cluster]
executor = "slurm"
partition = "gpu"
account = "cs336"
qos = "course"
gpus_per_task = 1
constraint = "h100"
time = 30
per_task = 8
max_parallel = 16
setup = ["module load cuda"]

[assignments.flash_attention]
due = 2027-01-20T17:00:00-08:00
"""


def test_the_cluster_table_is_read_and_other_tables_are_left_alone(tmp_path):
    (tmp_path / "grading.toml").write_text(COURSE)
    options = load_cluster(tmp_path / "grading.toml")
    assert options == ClusterOptions(executor="slurm", partition="gpu", account="cs336", qos="course",
                                     gpus_per_task=1, constraint="h100", time=30, per_task=8, max_parallel=16,
                                     setup=("module load cuda",))
    parameters = sbatch_parameters(options)
    assert {k: parameters[k] for k in ("partition", "account", "qos", "gpus_per_task", "constraint", "time",
                                       "array_parallelism", "setup")} == \
        {"partition": "gpu", "account": "cs336", "qos": "course", "gpus_per_task": 1, "constraint": "h100",
         "time": 30, "array_parallelism": 16, "setup": ["module load cuda"]}


def test_a_missing_table_gives_the_defaults(tmp_path):
    (tmp_path / "grading.toml").write_text("[assignments.resource_accounting]\ndue = 2027-01-01\n")
    assert load_cluster(tmp_path / "grading.toml") == ClusterOptions()
    assert ClusterOptions().executor == "local"


@pytest.mark.parametrize("text, expected", [
    ("[cluster]\npartitoin = 'gpu'\n", "unknown key\\(s\\) in \\[cluster\\]: partitoin"),
    ("[cluster]\nper_task = 0\n", "per_task must be a whole number of at least 1, got 0"),
    ("[cluster]\ntime = '1:00:00'\n", "time must be a whole number of at least 1, got '1:00:00'"),
    ("[cluster]\nexecutor = 'kubernetes'\n", "executor must be one of local, slurm"),
    ("[cluster]\npartition = 3\n", "partition must be a string"),
    ("[cluster]\nsetup = 'module load cuda'\n", "setup must be a list of shell lines"),
    ("[cluster\n", "is not valid TOML"),
])
def test_a_wrong_course_file_is_refused_with_what_is_wrong(tmp_path, text, expected):
    (tmp_path / "grading.toml").write_text(text)
    with pytest.raises(CourseError, match=expected):
        load_cluster(tmp_path / "grading.toml")


def test_the_command_line_wins_over_the_course_file(tmp_path, monkeypatch):
    (tmp_path / "grading.toml").write_text(COURSE)
    monkeypatch.chdir(tmp_path)  # found in the working folder without --course
    args = build_parser().parse_args(["batch", "c", "--out", "o", "--per-task", "2", "--partition", "a100"])
    options = cluster_options(args)
    assert (options.executor, options.partition, options.per_task, options.time) == ("slurm", "a100", 2, 30)
    args = build_parser().parse_args(["batch", "c", "--out", "o", "--executor", "local"])
    assert cluster_options(args).executor == "local"


def test_every_cluster_key_but_setup_is_an_option_of_batch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    keys = [f.name for f in dataclasses.fields(ClusterOptions) if f.name != "setup"]
    given = {"executor": "slurm", "partition": "p", "account": "a", "qos": "q", "gpus_per_task": 3,
             "constraint": "c", "time": 7, "per_task": 5, "max_parallel": 9, "cpus_per_task": 4, "mem": "16G"}
    assert sorted(given) == sorted(keys), "a [cluster] key without its batch option (or a new key to test)"
    flags = [part for key, value in given.items() for part in (f"--{key.replace('_', '-')}", str(value))]
    options = cluster_options(build_parser().parse_args(["batch", "c", "--out", "o", *flags]))
    assert {key: getattr(options, key) for key in keys} == given


def test_without_a_course_file_batch_grades_locally(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["batch", "c", "--out", "o"])
    assert cluster_options(args) == ClusterOptions()


def test_a_bad_course_file_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "g.toml").write_text("[cluster]\nqos = 1\n")
    args = build_parser().parse_args(["batch", "c", "--out", "o", "--course", str(tmp_path / "g.toml")])
    with pytest.raises(SystemExit) as exit:
        cluster_options(args)
    assert exit.value.code == 2 and "qos must be a string" in capsys.readouterr().err


def test_a_refused_gpu_request_names_the_option_and_what_to_do():
    said = Exception("Command '['sbatch', 'x.sh']' returned non-zero exit status 1.\n"
                     "sbatch: error: Invalid generic resource (gres) specification")
    message = refusal(said, ClusterOptions(executor="slurm", partition="cpu", gpus_per_task=2))
    assert message.startswith("the cluster refused the grading job: sbatch: error: Invalid generic resource")
    assert "--gpus-per-task 2 asks for GPUs, and the partition cpu has none" in message
    assert "sinfo -o '%P %G'" in message


def test_one_course_file_holds_the_cluster_and_the_late_policy(tmp_path):
    from datetime import datetime, timedelta, timezone

    from autograder.cohort.course import AssignmentPolicy, LateDays, load_late

    (tmp_path / "grading.toml").write_text(COURSE + "per_day = 0.1\n\n[late_days]\nbudget = 3\nafter = 0.5\n")
    assert load_cluster(tmp_path / "grading.toml").partition == "gpu"
    policy = load_late(tmp_path / "grading.toml", ["flash_attention", "resource_accounting"])
    due = datetime(2027, 1, 20, 17, tzinfo=timezone(timedelta(hours=-8)))
    assert policy.assignments == {"flash_attention": AssignmentPolicy(due, "per_day", per_day=0.1)}
    assert policy.late_days == LateDays(3, 0.5)
    (tmp_path / "grading.toml").write_text(COURSE)
    with pytest.raises(CourseError, match=r"\[assignments.flash_attention\]: rule = 'per_day' needs per_day"):
        load_late(tmp_path / "grading.toml")
    assert load_cluster(tmp_path / "grading.toml").partition == "gpu"  # the cluster table is read all the same


def test_check_reads_the_whole_file_and_names_what_is_wrong(tmp_path):
    """What `make gradescope` runs before packaging: every table, each assignment's section against all of them."""
    path = tmp_path / "grading.toml"
    late = "".join(f"\n[assignments.{name}]\ndue = 2027-01-20T17:00:00-08:00\nper_day = 0.1\n"
                   for name in ("resource_accounting", "flash_attention"))
    path.write_text(COURSE.split("[assignments")[0] + late)
    check(path, ["flash_attention", "gpu_kernels", "resource_accounting"])
    with pytest.raises(CourseError, match=r"\[assignments.flash_attention\]: no such assignment"):
        check(path, ["resource_accounting"])
    path.write_text(COURSE.split("[assignments")[0] + late + "\n[late-days]\nbudget = 3\n")
    with pytest.raises(CourseError, match="unknown table or key 'late-days' at the top level.*rename or remove it"):
        check(path, ["flash_attention", "resource_accounting"])
