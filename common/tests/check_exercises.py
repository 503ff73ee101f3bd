#!/usr/bin/env python3
"""Keeps every step's exercise skeleton in step with its solution.

A skeleton (steps/NN_name/exercise.cu) is the step's kernel file with some regions replaced by
TODO blocks:

    // TODO(student): what to write, and a hint
    <placeholder code that compiles>
    // END TODO

and a header comment of its own (the comment lines at the top of the file). Everything
else must match the solution line for line. This script checks that, for each skeleton given:
  - it has at least one TODO block, and the blocks are well formed;
  - filling each TODO block with the solution's lines at that place gives back exactly the
    solution (so a student who writes the solution's code passes whatever the solution passes).

Usage:
  check_exercises.py SKELETON...            check; exit 1 on the first mismatch
  check_exercises.py --solve SKELETON       print the skeleton with its TODOs solved
"""

import difflib
import pathlib
import sys

TODO_BEGIN = "TODO(student)"
TODO_END = "END TODO"


def body(lines):
    """The lines after the header comment and the blank lines that follow it."""
    i = 0
    while i < len(lines) and lines[i].lstrip().startswith("//"):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return lines[i:]


def todo_regions(lines, name):
    """[(first, last)] line ranges (inclusive) of the TODO blocks."""
    regions, start = [], None
    for i, line in enumerate(lines):
        if TODO_BEGIN in line:
            if start is not None:
                raise ValueError(f"{name}:{i + 1}: TODO block opened inside another")
            start = i
        elif TODO_END in line:
            if start is None:
                raise ValueError(f"{name}:{i + 1}: END TODO without a TODO(student)")
            regions.append((start, i))
            start = None
    if start is not None:
        raise ValueError(f"{name}:{start + 1}: TODO block never closed")
    if not regions:
        raise ValueError(f"{name}: no TODO(student) block")
    return regions


def solution_for(skeleton_path):
    """The step's kernel file, named after its directory: steps/03_shared_tiling/shared_tiling.cu."""
    step = skeleton_path.resolve().parent.name
    solution = skeleton_path.parent / (step.split("_", 1)[1] + ".cu")
    if not solution.exists():
        raise ValueError(f"{skeleton_path}: no solution file {solution.name} beside it")
    return solution


def solve(skeleton_path):
    """(header lines, solved body lines, number of TODO blocks) of a skeleton: each TODO block
    replaced by the solution's lines; raises ValueError if anything else differs."""
    solution_path = solution_for(skeleton_path)
    lines = skeleton_path.read_text().splitlines()
    skeleton = body(lines)
    header = lines[: len(lines) - len(skeleton)]
    solution = body(solution_path.read_text().splitlines())
    regions = todo_regions(skeleton, str(skeleton_path))
    inside = set()
    for first, last in regions:
        inside.update(range(first, last + 1))

    matcher = difflib.SequenceMatcher(a=skeleton, b=solution, autojunk=False)
    solved = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            solved.extend(skeleton[a0:a1])
            continue
        # A difference is allowed only where the skeleton has a TODO block.
        if a0 == a1:  # solution lines with no skeleton lines at all: must sit next to a TODO
            touching = (a0 - 1) in inside or a0 in inside
        else:
            touching = all(i in inside for i in range(a0, a1))
        if not touching:
            raise ValueError(
                f"{skeleton_path}: line {a0 + 1} of the body differs from {solution_path.name} "
                f"outside a TODO block:\n  skeleton: {skeleton[a0:a1][:3]}\n  solution: {solution[b0:b1][:3]}")
        solved.extend(solution[b0:b1])
    if solved != solution:
        raise ValueError(f"{skeleton_path}: solving the TODO blocks does not give back {solution_path.name}")
    return header, solved, len(regions)


def main(argv):
    if len(argv) >= 2 and argv[0] == "--solve":
        header, solved, _ = solve(pathlib.Path(argv[1]))
        print("\n".join(header + solved))
        return 0
    if not argv:
        print(__doc__)
        return 2
    for name in argv:
        path = pathlib.Path(name)
        try:
            _, _, blocks = solve(path)
        except ValueError as error:
            print(f"FAIL {error}")
            return 1
        print(f"ok   {path} ({blocks} TODO blocks)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
