"""Runs a trainer with kcache as torch.compile's remote cache, no code change:

    KCACHE_URL=http://kcached:7070 KCACHE_NAMESPACE=team-a \
        python -m kcache.torch.run [--] train.py [ARGS...]
    python -m kcache.torch.run -m package.module [ARGS...]
    torchrun --nproc-per-node 8 -m kcache.torch.run train.py [ARGS...]

The script runs as `python train.py ARGS` would run it: as __main__, with
sys.argv and sys.path[0] as Python sets them, its exit code and exceptions
its own. Before it, the KCACHE_TORCH=1 hook is installed (_kcache_autoenable):
the first torch.compile calls enable() from the environment (every KCACHE_*
variable: README). Not before the script: importing torch and Inductor's
config here would read their environment before the script sets it, which
`python train.py` does not. Failing open: if enable() fails, a WARNING on
logger "kcache" and the script runs without the remote cache. KCACHE_TORCH=1
is exported, so the processes the trainer starts enable kcache too where the
.pth switch is installed.
"""

from __future__ import annotations

import os
import runpy
import sys

USAGE = "usage: python -m kcache.torch.run [--] SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def _parse(argv: list[str]) -> tuple[str, str, list[str]]:
    """("script" | "module", target, args after it)."""
    if not argv:
        _usage_error("no script given")
    if argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0)
    if argv[0] == "-m":
        if len(argv) < 2:
            _usage_error("-m needs a module name")
        return "module", argv[1], argv[2:]
    if argv[0] == "--":
        argv = argv[1:]
        if not argv:
            _usage_error("no script after --")
    elif argv[0].startswith("-"):
        _usage_error(f"unknown option {argv[0]}")
    return "script", argv[0], argv[1:]


def _usage_error(message: str):
    print(f"kcache.torch.run: {message}\n{USAGE}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str]) -> None:
    kind, target, args = _parse(argv)
    if kind == "script" and not os.path.exists(target):
        # What `python SCRIPT` says, before paying for torch's import.
        print(f"{sys.executable}: can't open file {os.path.abspath(target)!r}: No such file", file=sys.stderr)
        raise SystemExit(2)

    import _kcache_autoenable

    _kcache_autoenable.install()
    os.environ["KCACHE_TORCH"] = "1"

    if kind == "module":
        sys.argv = [target, *args]  # run_module puts the module's file in argv[0], as `python -m` does
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [target, *args]
        sys.path[0] = os.path.dirname(os.path.abspath(target))  # `python SCRIPT` puts its dir first, not cwd
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
