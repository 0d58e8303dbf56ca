"""Models for test_torch_async, importable by name in the background compile."""

import torch


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
    )


def linear() -> torch.nn.Module:
    """Compiles to an extern matmul and no C++ kernel: a cold compile of
    seconds on a CPU, for tests about who compiles rather than what."""
    torch.manual_seed(0)
    return torch.nn.Linear(32, 8, bias=False)


def broken() -> torch.nn.Module:
    raise RuntimeError("this factory cannot build the model")
