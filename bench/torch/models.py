"""The models of compile_cache_bench: each builds its module and inputs from a
fixed seed, runs one step, and compares a compiled step with eager.

    resnet50   torchvision ResNet-50 inference, random weights, fp32
    gpt2       GPT-2 small (transformers' config, random weights): forward + backward
    mlp        4-layer bf16 MLP, compiled with mode="max-autotune-no-cudagraphs"
    resnet18_ro  torchvision ResNet-18 inference, mode="reduce-overhead" (CUDA graphs)
    gpt2_dyn   GPT-2 small inference, dynamic=True (symbolic shapes)
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable

import torch


@dataclasses.dataclass
class Workload:
    module: torch.nn.Module
    step: Callable[[torch.nn.Module], list[torch.Tensor]]  # the tensors compared with eager
    compile_kwargs: dict
    tolerance: float  # max error relative to the largest reference value


def _resnet50(device: str) -> Workload:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(device).eval()
    x = torch.randn(32, 3, 224, 224, device=device)

    def step(m):
        with torch.no_grad():
            return [m(x)]

    return Workload(model, step, {}, 1e-2)


def _gpt2(device: str) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    # GPT-2 small (12 layers, 768 wide, 124M parameters); dropout off, so the
    # compiled step can be compared with eager.
    config = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).to(device).train()
    ids = torch.randint(0, config.vocab_size, (8, 512), device=device)

    def step(m):
        m.zero_grad(set_to_none=True)
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        grads = [p.grad for p in m.parameters() if p.grad is not None]
        return [loss.detach(), torch.cat([g.flatten() for g in grads[:8]])]

    return Workload(model, step, {}, 2e-2)


def _mlp(device: str) -> Workload:
    torch.manual_seed(0)
    dims = [4096, 8192, 8192, 4096, 1024]
    layers: list[torch.nn.Module] = []
    for i in range(4):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < 3:
            layers.append(torch.nn.GELU())
    model = torch.nn.Sequential(*layers).to(device=device, dtype=torch.bfloat16)
    x = torch.randn(8192, dims[0], device=device, dtype=torch.bfloat16)

    def step(m):
        with torch.no_grad():
            return [m(x)]

    return Workload(model, step, {"mode": "max-autotune-no-cudagraphs"}, 3e-2)


def _resnet18_reduce_overhead(device: str) -> Workload:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).to(device).eval()
    x = torch.randn(16, 3, 224, 224, device=device)

    def step(m):
        with torch.no_grad():
            # A copy: a CUDA graph's output is overwritten by its next replay.
            return [m(x).clone()]

    return Workload(model, step, {"mode": "reduce-overhead"}, 1e-2)


def _gpt2_dynamic(device: str) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).to(device).eval()
    ids = torch.randint(0, model.config.vocab_size, (4, 384), device=device)

    def step(m):
        with torch.no_grad():
            return [m(input_ids=ids).logits]

    return Workload(model, step, {"dynamic": True}, 2e-2)


MODELS = {
    "resnet50": _resnet50,
    "gpt2": _gpt2,
    "mlp": _mlp,
    "resnet18_ro": _resnet18_reduce_overhead,
    "gpt2_dyn": _gpt2_dynamic,
}


def build(name: str, device: str) -> Workload:
    return MODELS[name](device)


def max_relative_error(got: list[torch.Tensor], want: list[torch.Tensor]) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        scale = w.float().abs().max().clamp_min(1e-6)
        worst = max(worst, ((g.float() - w.float()).abs().max() / scale).item())
    return worst


def eager_reference(workload: Workload) -> list[torch.Tensor]:
    reference = copy.deepcopy(workload.module)
    return [t.detach().clone() for t in workload.step(reference)]
