"""examples/specs: the CPU examples compile through a real kcached.

The C++ test tests/compiler/spec_examples_test.cpp parses and checks every
example (CUDA ones included) with the spec parser itself; here the ones a
CPU-only host can build are submitted as a user would and must succeed.
"""

import json
import re
from pathlib import Path

import kcache
import pytest

REPO = Path(__file__).resolve().parents[3]
SPECS = REPO / "examples" / "specs"
# Built on any x86-64 host (LLVM's NVPTX backend included); the rest need NVRTC or nvJitLink.
CPU_EXAMPLES = ["cpp_shared.json", "cpp_object.json", "llvm_ir_shared.json", "llvm_ir_ptx.json", "autotune_cpu.json"]


def fields(value, path=""):
    """Every member name of a spec, as "autotune.benchmark.args[].dtype"; the
    maps whose keys the user names (parameters, shapes, the reference) stop there."""
    if isinstance(value, dict):
        for key, member in value.items():
            name = f"{path}.{key}" if path else key
            yield name
            if key not in ("params", "shapes", "reference"):
                yield from fields(member, name)
    elif isinstance(value, list):
        for item in value:
            yield from fields(item, path + "[]")


def test_docs_specs_md_has_a_row_for_every_field_the_examples_use():
    doc = (REPO / "docs" / "SPECS.md").read_text()
    used = {name for path in SPECS.glob("*.json") for name in fields(json.loads(path.read_text()))}
    # A field is documented as `name`, `parent.name` or "name" (in a shape such as {"grid", "block"}).
    def documented(name):
        leaf = re.escape(name.split(".")[-1])
        return re.search(r'[`."]' + leaf + r'[`"]', doc) is not None

    missing = sorted(name for name in used if not documented(name))
    assert not missing, missing


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
