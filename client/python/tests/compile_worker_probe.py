"""Runs inside an Inductor compile worker (test_torch_workers)."""


def remote_autotune_backend_url():
    import torch._inductor.remote_cache as remote_cache

    backend = remote_cache.RemoteAutotuneCache.backend_override_cls
    return None if backend is None else backend.args[0].settings.url
