#!/usr/bin/env python3
"""The docs cannot drift from the code: every command block marked runnable in README.md and docs/
(a `<!-- runnable -->` line right before a ```bash block) runs as written with the bench of this
build, each in a fresh directory that has the repository's reports/ and examples/, and must exit 0;
every relative link in them must point at a file that exists; the README stays a page.

Environment: BENCH (the bench binary), SOURCE_DIR (the repository root)."""
import os
import re
import subprocess
import tempfile
import unittest

BENCH = os.environ["BENCH"]
SOURCE_DIR = os.environ["SOURCE_DIR"]
MARK = "<!-- runnable -->"


def pages():
    docs = os.path.join(SOURCE_DIR, "docs")
    return [os.path.join(SOURCE_DIR, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def runnable_blocks(path):
    """(first line number, text) of each block marked runnable."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() not in ("```bash", "```sh"):
            raise AssertionError(f"{path}:{i + 1}: {MARK} is not right before a ```bash block")
        end = lines.index("```", i + 2)
        blocks.append((i + 3, "\n".join(lines[i + 2:end])))
    return blocks


class Docs(unittest.TestCase):
    def test_runnable_commands_run(self):
        blocks = [(p, n, text) for p in pages() for n, text in runnable_blocks(p)]
        # The README's first session, and at least one per page that shows bench at work.
        self.assertGreaterEqual(len(blocks), 5, "runnable blocks went missing")
        bin_dir = tempfile.mkdtemp(prefix="docs-bin-")
        os.symlink(BENCH, os.path.join(bin_dir, "bench"))
        nvtx = os.environ.get("HARNESS_HAVE_NVTX", "1") in ("1", "ON", "TRUE", "true")
        for path, line, text in blocks:
            where = f"{os.path.relpath(path, SOURCE_DIR)}:{line}"
            if "--nvtx-only" in text and not nvtx:
                continue  # a build configured without NVTX refuses --nvtx-only (exit 2)
            with self.subTest(block=where), tempfile.TemporaryDirectory(prefix="docs-") as cwd:
                for name in ("reports", "examples"):
                    os.symlink(os.path.join(SOURCE_DIR, name), os.path.join(cwd, name))
                env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"],
                           TMPDIR=cwd)
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=cwd, env=env,
                                   capture_output=True, text=True, timeout=600,
                                   stdin=subprocess.DEVNULL)
                self.assertEqual(r.returncode, 0,
                                 f"{where} exited {r.returncode}:\n{text}\n--- stdout\n"
                                 f"{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")

    def test_relative_links_resolve(self):
        link = re.compile(r"\]\(([^)\s]+)\)")
        for path in pages():
            text = open(path, encoding="utf-8").read()
            for target in link.findall(text):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                file = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
                with self.subTest(page=os.path.relpath(path, SOURCE_DIR), link=target):
                    self.assertTrue(os.path.exists(file), f"{target} -> {file} does not exist")

    def test_the_readme_is_a_page(self):
        with open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        self.assertLess(len(lines), 200)
        # It starts with the two commands that set up a fresh machine.
        self.assertEqual(lines[2], "```bash")
        self.assertTrue(lines[3].startswith("./scripts/bench.sh --scenario resume_adam"))
        self.assertTrue(lines[4].startswith("./scripts/test.sh"))


if __name__ == "__main__":
    unittest.main()
