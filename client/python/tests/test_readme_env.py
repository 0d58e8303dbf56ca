"""The README's environment table names every KCACHE_* variable the sources read.

A variable is what a source reads from the environment: a quoted name in C++
and Python (getenv("KCACHE_URL"), os.environ.get("KCACHE_URL"), a table of
names), a $KCACHE_X / ${KCACHE_X...} reference in a shell script. No libkcache
or kcached is needed: this only reads files.
"""

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
NAME = r"KCACHED?_[A-Z0-9][A-Z0-9_]*"
QUOTED = re.compile(r"""["'](""" + NAME + r""")["']""")
SHELL_REF = re.compile(r"\$\{?(" + NAME + r")\b")

# Quoted names that are not environment variables.
NOT_VARIABLES = {
    "KCACHE_TEST_PTXAS_OOM": "a marker a test writes into a spec's source (tests/compiler/crashing_worker.cpp)",
    "KCACHE_RESERVE": "the name of the RocksDB tier's reserve file (tests/storage/full_disk_test.cpp)",
    "KCACHED_PID": "a shell variable of scripts/lib/kcached.sh, set and read there",
}


def source_files():
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                check=True, capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but the builds
        listed = [str(p.relative_to(REPO)) for p in REPO.rglob("*") if ".git" not in p.parts]
    for name in listed:
        path = REPO / name
        if name.startswith(("build/", "tests/fuzz/corpus/")) or not path.is_file():
            continue
        yield name, path


def variables_read():
    """{variable: [files that read it]}"""
    found = {}
    for name, path in source_files():
        suffix = path.suffix
        if suffix in (".cpp", ".h", ".hpp", ".py", ".pth"):
            pattern = QUOTED
        elif suffix in ("", ".sh") and path.read_bytes()[:2] == b"#!":
            pattern = SHELL_REF
        else:
            continue
        for variable in pattern.findall(path.read_text(errors="replace")):
            if variable not in NOT_VARIABLES:
                found.setdefault(variable, []).append(name)
    return found


def readme_section():
    text = (REPO / "README.md").read_text()
    start = text.index("\n## Environment variables\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def documented():
    """Variables in the first column of the README's table."""
    names = set()
    for line in readme_section().splitlines():
        if line.startswith("| `"):
            names.update(re.findall(NAME, line.split("|")[1]))
    return names


def test_the_scan_finds_the_variables_everyone_knows():
    found = variables_read()
    for variable in ("KCACHE_URL", "KCACHE_TOKEN", "KCACHE_LIBRARY", "KCACHE_TORCH_TIMEOUT_MS",
                     "KCACHE_WORKER_BINARY", "KCACHE_DEMO_WORKERS"):
        assert variable in found, variable


def test_every_variable_read_is_in_the_readme_table():
    table = documented()
    section = readme_section()
    missing = {}
    for variable, files in sorted(variables_read().items()):
        if variable in table:
            continue
        # kcached's own settings (KCACHED_*) come from its settings table and
        # are listed by `kcached --help`, which the README section points to.
        if variable.startswith("KCACHED_") and "kcached --help" in section:
            continue
        missing[variable] = files
    assert not missing, f"README.md 'Environment variables' misses: {missing}"


def test_the_table_names_no_variable_nothing_reads():
    stale = documented() - set(variables_read())
    assert not stale, f"README.md documents variables no source reads: {sorted(stale)}"
