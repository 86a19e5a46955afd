"""`python -m kernels.crosscompile`: the command line (the usage is the package's docstring)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from kernels import crosscompile
from kernels.crosscompile.compiler import TARGETS, run_builds
from kernels.crosscompile.dryrun import interpreted
from kernels.crosscompile.project import DTYPES, PARTS, ROOT, matrix
from kernels.crosscompile.report import print_table
from kernels.crosscompile.request import answer_request


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.crosscompile",
                                     description=crosscompile.__doc__.splitlines()[0])
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated: sm_80,sm_90,sm_100")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated: bf16,fp16")
    parser.add_argument("--head-dims", default="64,80,128", help="comma-separated head dims")
    parser.add_argument("--quick", action="store_true", help="sm_90, bf16, d 64, each kernel's first config")
    parser.add_argument("--first-config", action="store_true", help="only each autotuned kernel's first config")
    parser.add_argument("--impl", default=os.environ.get("LLMSYS_IMPL") or ("solutions" if (ROOT / "solutions").is_dir()
                        else "assignments"), help="tree of the FlashAttention: solutions, assignments or a path")
    parser.add_argument("--assignment", choices=PARTS, action="append", help="only these kernels (repeatable): "
                        "an assignment's, or the course's demos; default all")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1) // 2), help="builds in parallel")
    parser.add_argument("--every-build", action="store_true", help="print a row per build, not per kernel")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--request", type=Path, help="answer a JSON compile request (the grader's)")
    parser.add_argument("--out", type=Path, help="with --request: where to write the JSON answer")
    args = parser.parse_args(argv)
    if interpreted() and "triton" in sys.modules:
        parser.error("Triton was imported interpreted (TRITON_INTERPRET=1) before kernels.crosscompile ran; "
                     "run `python -m kernels.crosscompile` in its own process")
    os.environ["TRITON_INTERPRET"] = "0"  # importing `kernels` set it to 1 without CUDA: builds need the compiler
    if args.request:
        if not args.out:
            parser.error("--request needs --out")
        answer = answer_request(json.loads(args.request.read_text()))
        args.out.write_text(json.dumps(answer))
        return 0
    if args.quick:
        targets, dtypes, head_dims, all_configs = ["sm_90"], ["bf16"], [64], False
    else:
        targets, dtypes = args.targets.split(","), args.dtypes.split(",")
        head_dims, all_configs = [int(d) for d in args.head_dims.split(",")], not args.first_config
    unknown = [t for t in targets if t not in TARGETS] + [d for d in dtypes if d not in DTYPES]
    if unknown:
        parser.error(f"unknown target or dtype {unknown}; targets {list(TARGETS)}, dtypes {list(DTYPES)}")
    started = time.perf_counter()
    skipped: list = []
    builds = matrix(targets, dtypes, head_dims, all_configs, args.impl, tuple(args.assignment or PARTS), skipped)
    results = run_builds(builds, args.jobs, progress=not args.quick)
    print_table(results, args.every_build or args.quick)
    for what, why in skipped:
        print(f"not built, not implemented yet: {what} ({why})")
    # gpu_kernels' handout asks for int64 offsets, and the grader's build check fails a 32-bit one computed from a
    # program id (kernels.crosscompile.offsets); FlashAttention's bounded offsets are its own to choose.
    narrow = [r for r in results if r.ok and r.int32_offsets and "gpu_kernels" in r.label]
    for r in narrow:
        print(f"{r.kernel} ({r.label}, {r.target}): 32-bit pointer offsets from a program id at "
              f"{', '.join(map(str, r.int32_offsets))}: a tensor of more than 2³¹ elements overflows them, and the "
              "grader's build check fails them; widen the id first, tl.program_id(0).to(tl.int64) (handout §A.4)")
    failed = [r for r in results if r.problems() or any(r is n for n in narrow)]
    print(f"{len(results)} builds in {time.perf_counter() - started:.0f} s: {len(results) - len(failed)} ok, "
          f"{len(failed)} with problems")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([r.to_dict() for r in results], indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
