#!/usr/bin/env python3
"""Checks the repository's Markdown (runs in CI; standard library only).

Links: in every Markdown file of the repository (`git ls-files`, tracked files and new ones
that git does not ignore; without git, every .md file under the repository's root outside
hidden and build directories), every relative link or image, [text](target) or
[label]: target, must resolve: the file or folder exists relative to the Markdown file (a
leading / means the repository's root), and a #anchor, in the same file or another Markdown
file, names a heading of that file the way GitHub makes anchors of headings (lowercase,
spaces to '-', punctuation other than '-' and '_' dropped, a repeated heading gets -1, -2,
...) or an explicit <a id="..."> or <a name="...">. Links with a scheme (https:, mailto:)
and links in code (fenced blocks, `inline code`) or HTML comments are not checked.

Sections: every steps/NN_name/README.md has exactly these H2 headings, in this order:
The idea, How it works, The code, Measured, What we learned, Exercises, Further reading.

usage:
  check_markdown.py                  both checks
  check_markdown.py --links-only     only the links
  check_markdown.py --sections-only  only the step READMEs' sections

Prints one line per problem (file:line: what). Exit status: 0 no problem (a one-line summary),
1 problems, 2 bad usage.
"""
import os
import pathlib
import re
import subprocess
import sys
import unicodedata
import urllib.parse

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
STEP_SECTIONS = ["The idea", "How it works", "The code", "Measured", "What we learned",
                 "Exercises", "Further reading"]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
EXPLICIT_ANCHOR = re.compile(r"""<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]^][^\]]*\]:\s*(<[^>]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
COMMENT = re.compile(r"<!--.*?-->")


def markdown_files():
    """Repository-relative paths of the Markdown files to check."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(REPOSITORY), "ls-files", "--cached", "--others",
             "--exclude-standard", "--", "*.md"],
            capture_output=True, text=True, check=True).stdout.splitlines()
        return sorted({name for name in listed if (REPOSITORY / name).is_file()})
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for folder, subfolders, files in os.walk(REPOSITORY):
        # Hidden folders (.git) and build trees (they hold meson-private/) are not sources.
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and
                               not (pathlib.Path(folder, d) / "meson-private").is_dir())
        for name in files:
            if name.endswith(".md"):
                found.append(pathlib.Path(folder, name).relative_to(REPOSITORY).as_posix())
    return sorted(found)


def prose_lines(text):
    """(line number, line, line with inline code blanked out) of the lines outside fenced code
    blocks, HTML comments removed."""
    fence = None
    in_comment = False
    for number, line in enumerate(text.split("\n"), start=1):
        opening = FENCE.match(line)
        if fence:
            closes = opening and opening.group(1)[0] == fence[0] and \
                len(opening.group(1)) >= len(fence) and not line.strip().strip(fence[0])
            if closes:
                fence = None
            continue
        if opening and not in_comment:
            fence = opening.group(1)
            continue
        if in_comment:
            if "-->" not in line:
                continue
            line = line[line.index("-->") + 3:]
            in_comment = False
        line = COMMENT.sub("", line)
        if "<!--" in line:
            line, in_comment = line[:line.index("<!--")], True
        yield number, line, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def heading_text(raw):
    """The text GitHub renders for a heading's source: code spans keep their text; elsewhere
    links become their text, and HTML tags and emphasis marks go."""
    parts = []
    for i, part in enumerate(CODE_SPAN.split(raw)):
        if i % 3 == 2:  # a code span's content (split yields text, backticks, content, ...)
            parts.append(part.strip())
        elif i % 3 == 0:
            part = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", part)
            part = re.sub(r"<[^>]+>", "", part)
            part = re.sub(r"(?<!\w)_+|_+(?!\w)", "", part)
            parts.append(part)
    return "".join(parts).strip()


def slug(text):
    """GitHub's anchor for a heading's text (before the -1, -2 of repeated headings)."""
    kept = []
    for ch in text.lower():
        if ch in "-_ " or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def headings(text):
    """[(line number, level, text)] of the ATX and setext headings outside code."""
    found = []
    previous_number, previous = None, ""
    for number, line, _ in prose_lines(text):
        atx = ATX_HEADING.match(line)
        underline = SETEXT_UNDERLINE.match(line)
        if atx:
            found.append((number, len(atx.group(1)), heading_text(atx.group(2) or "")))
            line = ""
        elif (underline and previous.strip() and previous_number == number - 1
              and not re.match(r"^ {0,3}([|>*+-]|\d+[.)]|#)", previous)):
            found.append((previous_number, 1 if underline.group(1)[0] == "=" else 2,
                          heading_text(previous)))
            line = ""
        previous_number, previous = number, line
    return found


def anchors(text):
    """Every anchor a link may name in this file."""
    names, seen = set(), {}
    for _, _, title in headings(text):
        base = slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        names.add(base if count == 0 else f"{base}-{count}")
    names.update(EXPLICIT_ANCHOR.findall(text))
    return names


def link_targets(line):
    """The targets of the inline links and images, and of a reference definition, in a line."""
    targets = []
    definition = REFERENCE_DEFINITION.match(line)
    if definition:
        targets.append(definition.group(1))
    start = 0
    while True:
        start = line.find("](", start)
        if start < 0:
            return [t.strip("<>") for t in targets]
        i = start + 2
        while i < len(line) and line[i] in " \t":
            i += 1
        if line.startswith("<", i):
            end = line.find(">", i)
            end = len(line) if end < 0 else end + 1
        else:
            depth, end = 0, i
            while end < len(line) and not line[end].isspace():
                if line[end] == "(":
                    depth += 1
                elif line[end] == ")":
                    if depth == 0:
                        break
                    depth -= 1
                end += 1
        targets.append(line[i:end])
        start = end


class Checker:
    def __init__(self):
        self.problems = []
        self.anchor_cache = {}
        self.links = 0
        self.sections_wrong = False

    def problem(self, name, line, what):
        self.problems.append(f"{name}:{line}: {what}")

    def anchors_of(self, path):
        if path not in self.anchor_cache:
            self.anchor_cache[path] = anchors(path.read_text(encoding="utf-8", errors="replace"))
        return self.anchor_cache[path]

    def check_links(self, name):
        source = REPOSITORY / name
        text = source.read_text(encoding="utf-8", errors="replace")
        for number, _, line in prose_lines(text):
            for target in link_targets(line):
                if not target or SCHEME.match(target):
                    continue
                self.links += 1
                self.check_link(name, number, source, target)

    def check_link(self, name, number, source, target):
        path_part, _, anchor = target.partition("#")
        path_part = urllib.parse.unquote(path_part.split("?")[0])
        anchor = urllib.parse.unquote(anchor)
        if not path_part:
            destination = source
        elif path_part.startswith("/"):
            destination = REPOSITORY / path_part.lstrip("/")
        else:
            destination = source.parent / path_part
        destination = pathlib.Path(os.path.normpath(destination))
        if destination != REPOSITORY and REPOSITORY not in destination.parents:
            self.problem(name, number, f"link '{target}' leads out of the repository")
            return
        if not destination.exists():
            shown = destination.relative_to(REPOSITORY).as_posix()
            self.problem(name, number, f"link '{target}': there is no {shown}")
            return
        if anchor and destination.is_file() and destination.suffix.lower() == ".md":
            if anchor not in self.anchors_of(destination):
                shown = destination.relative_to(REPOSITORY).as_posix()
                self.problem(name, number, f"link '{target}': {shown} has no heading or anchor "
                                           f"'#{anchor}'")

    def check_sections(self):
        count = 0
        for folder in sorted((REPOSITORY / "steps").glob("[0-9][0-9]_*")):
            if not folder.is_dir():
                continue
            count += 1
            readme = folder / "README.md"
            name = readme.relative_to(REPOSITORY).as_posix()
            if not readme.is_file():
                self.problem(name, 1, "missing: every step has a README.md")
                continue
            found = [(number, title) for number, level, title in
                     headings(readme.read_text(encoding="utf-8", errors="replace")) if level == 2]
            titles = [title for _, title in found]
            if titles == STEP_SECTIONS:
                continue
            self.sections_wrong = True
            for number, title in found:
                if title not in STEP_SECTIONS:
                    self.problem(name, number, f"'## {title}' is not a step section")
                elif titles.count(title) > 1 and titles.index(title) != found.index(
                        (number, title)):
                    self.problem(name, number, f"'## {title}' appears a second time")
            for title in STEP_SECTIONS:
                if title not in titles:
                    self.problem(name, 1, f"no '## {title}' section")
            present = list(dict.fromkeys(t for t in titles if t in STEP_SECTIONS))
            expected = [t for t in STEP_SECTIONS if t in present]
            for position, title in enumerate(present):
                if title != expected[position]:
                    number = found[titles.index(title)][0]
                    self.problem(name, number, f"'## {title}' is out of order")
                    break
        return count


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    options = set(argv)
    if not options <= {"--links-only", "--sections-only"} or len(options) > 1:
        print("check_markdown.py: options are --links-only or --sections-only (see --help)",
              file=sys.stderr)
        return 2
    checker = Checker()
    summary = []
    if "--sections-only" not in options:
        files = markdown_files()
        for name in files:
            checker.check_links(name)
        summary.append(f"{checker.links} relative links in {len(files)} Markdown files resolve")
    if "--links-only" not in options:
        steps = checker.check_sections()
        summary.append(f"the {steps} step READMEs have the step sections in order")
    for problem in checker.problems:
        print(problem)
    if checker.problems:
        print(f"check_markdown.py: {len(checker.problems)} problem(s)", file=sys.stderr)
        if checker.sections_wrong:
            print(f"(a step README's H2 sections are, in this order: {', '.join(STEP_SECTIONS)})",
                  file=sys.stderr)
        return 1
    print(f"check_markdown.py: {'; '.join(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
