"""What a compile bundle is keyed by and what its header checks before it loads.

PyTorch finds a precompile entry by a function's qualified name and first line
alone (see _bundles), so kcache keys a bundle by the run, the main script and
the system (versions, devices), and its header lists a signature per
torch.compile call of the saving run: compile kwargs, the model's class,
source, tensors and modules, and the three compile configs.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import platform
import sys
from typing import Any, Optional

from . import _keys
from ._prefetch import fingerprint

# 2: bundles saved by runs that compiled afresh; version 1's markers said
# "PyTorch packaged nothing" for GPU models that it does package now.
BUNDLE_VERSION = 2
# Location-only settings: where debug output goes says nothing of the code.
_IGNORED_CONFIG = {"torch._dynamo.config": ("debug_dir_root",)}


def _sha256_file(path: Optional[str]) -> str:
    if not path:
        return "none"
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return "unreadable:" + path


def system() -> dict:
    """What a bundle depends on beyond the code: versions and devices."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    devices = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            devices.append([torch.cuda.get_device_name(i), list(torch.cuda.get_device_capability(i))])
    script = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "triton": triton_version,
        "devices": devices,
        "script_sha256": _sha256_file(script),
    }


_CONFIG_ENV_PREFIXES = ("TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE", "TORCH_DYNAMO", "TORCH_FUNCTORCH")
# Not what is compiled: where and with how many threads, and the remote-cache
# switches kcache.enable() itself sets (set or not yet, rank by rank).
_CONFIG_ENV_IGNORED = frozenset(
    {
        "TORCHINDUCTOR_CACHE_DIR",
        "TORCHINDUCTOR_COMPILE_THREADS",
        "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE",
        "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE",
        "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE",
        "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE",
        "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO",
    }
)


def _config_digest(imported_only: bool = False) -> str:
    """The three compile configs; imported_only: a config module not imported
    yet is hashed as the environment that will set it (its defaults are
    torch's, hashed with torch's version elsewhere) instead of imported."""
    import importlib

    h = hashlib.sha256()
    for name in ("torch._inductor.config", "torch._dynamo.config", "torch._functorch.config"):
        if imported_only and name not in sys.modules:
            env = {
                k: v
                for k, v in os.environ.items()
                if k.startswith(_CONFIG_ENV_PREFIXES) and k not in _CONFIG_ENV_IGNORED
            }
            h.update(name.encode() + b"\0env\0" + _canonical(env).encode() + b"\0")
            continue
        config = importlib.import_module(name).save_config_portable()
        for ignored in _IGNORED_CONFIG.get(name, ()):
            config.pop(ignored, None)
        h.update(name.encode() + b"\0" + _canonical(config).encode() + b"\0")
    return h.hexdigest()


def _canonical(value: Any) -> str:
    # repr() of a set follows string hashing, which differs per process.
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(_canonical(v) for v in value)) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(sorted(f"{_canonical(k)}:{_canonical(v)}" for k, v in value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    return repr(value)


def _source_file(obj: Any) -> Optional[str]:
    try:
        return inspect.getsourcefile(obj)
    except TypeError:
        return None


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def _kwarg_text(value: Any) -> str:
    if callable(value) and not isinstance(value, str):
        return "callable:" + _qualname(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{_kwarg_text(v)}" for k, v in sorted(value.items())) + "}"
    return repr(value)


def signature(model: Any, kwargs: dict, imported_configs_only: bool = False) -> dict:
    """Everything about one torch.compile call a precompile entry depends on
    (imported_configs_only: see _config_digest; never for a bundle's key)."""
    import torch

    target = type(model) if isinstance(model, torch.nn.Module) else model
    out = {
        "target": _qualname(target),
        "source_sha256": _sha256_file(_source_file(target)),
        "kwargs": {k: _kwarg_text(v) for k, v in sorted(kwargs.items())},
        "config_sha256": _config_digest(imported_configs_only),
    }
    # A bound method (Module.compile() compiles self._call_impl) stands for its module.
    owner = getattr(model, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        out["owner"] = _qualname(type(owner))
        out["owner_source_sha256"] = _sha256_file(_source_file(type(owner)))
        model = owner
    if isinstance(model, torch.nn.Module):
        tensors = hashlib.sha256()
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            tensors.update(f"{name}:{tuple(t.shape)}:{t.dtype}:{t.device}:{t.requires_grad}\n".encode())
        for name, sub in model.named_modules():
            tensors.update(f"{name}:{_qualname(type(sub))}:{sub.training}\n".encode())
        out["modules_sha256"] = tensors.hexdigest()
    return out


def bundle_key(namespace: str, system_info: dict) -> str:
    # The version too: an older kcache reads a newer bundle as unreadable and would overwrite it.
    text = json.dumps({"run": fingerprint(), "system": system_info, "version": BUNDLE_VERSION}, sort_keys=True)
    return _keys.bundle_entry(namespace, hashlib.sha256(text.encode()).hexdigest()[:40])


def pack(header: dict, bundle: bytes) -> bytes:
    return json.dumps(header, sort_keys=True).encode() + b"\n" + bundle


class OldBundle(ValueError):
    """A bundle or marker of another BUNDLE_VERSION."""


def unpack(value: bytes) -> tuple[dict, bytes]:
    head, _, bundle = value.partition(b"\n")
    header = json.loads(head)
    if not isinstance(header, dict):
        raise ValueError("not a kcache compile bundle")
    if header.get("version") != BUNDLE_VERSION:
        raise OldBundle(f"compile bundle version {header.get('version')!r}, not {BUNDLE_VERSION}")
    return header, bundle
