"""examples/specs: the CPU examples compile through a real kcached.

The C++ test tests/compiler/spec_examples_test.cpp parses and checks every
example (CUDA ones included) with the spec parser itself; here the ones a
CPU-only host can build are submitted as a user would and must succeed.
"""

import json
from pathlib import Path

import kcache
import pytest

REPO = Path(__file__).resolve().parents[3]
SPECS = REPO / "examples" / "specs"
# Built on any x86-64 host (LLVM's NVPTX backend included); the rest need NVRTC or nvJitLink.
CPU_EXAMPLES = ["cpp_shared.json", "cpp_object.json", "llvm_ir_shared.json", "llvm_ir_ptx.json", "autotune_cpu.json"]


def test_the_cpu_list_covers_every_example_without_cuda():
    for path in sorted(SPECS.glob("*.json")):
        spec = json.loads(path.read_text())
        needs_cuda = spec["backend"] in ("cuda", "ptx")
        assert (path.name in CPU_EXAMPLES) != needs_cuda, path.name


@pytest.mark.parametrize("name", CPU_EXAMPLES)
def test_cpu_example_compiles(daemon, name):
    spec = json.loads((SPECS / name).read_text())
    client = kcache.Client(daemon.url, timeout_ms=10_000)
    answer = client.submit(spec, key="examples:" + name)
    assert answer.get("status") in ("queued", "joined", "cached"), answer
    job = client.wait(answer["job"]["id"], timeout_s=120)
    assert job["state"] == "succeeded", job
    artifact = client.get("examples:" + name)
    assert artifact, "the result is published under the submitter's key"
    if spec["output"] == "ptx":
        assert b".visible .entry scale" in artifact
    elif "autotune" not in spec:
        assert artifact[:4] == b"\x7fELF"
