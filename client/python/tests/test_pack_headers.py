"""kcache.pack_headers: headers from this machine's disk packed into a spec."""

import json

import pytest

import kcache


def _spec(text, options=()):
    return {
        "backend": "cpp",
        "source": {"name": "k.cpp", "text": text},
        "name_expressions": ["scaled"],
        "options": list(options),
        "target": "x86-64-v2",
        "output": "shared",
    }


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "inc" / "ops").mkdir(parents=True)
    (tmp_path / "extra").mkdir()
    (tmp_path / "inc" / "ops" / "scale.h").write_text('#pragma once\n#include "factor.h"\n#include <vector>\n')
    (tmp_path / "inc" / "ops" / "factor.h").write_text("constexpr int kFactor = 3;\n")
    (tmp_path / "extra" / "more.h").write_text("constexpr int kMore = 4;\n")
    return tmp_path


def test_packs_from_the_specs_include_dirs_and_extra_dirs(tree):
    spec = _spec('#include <ops/scale.h>\n#include "more.h"\n', ["-O2", "-I", str(tree / "inc")])
    spec["custom"] = {"kept": True}
    packed = kcache.pack_headers(spec, include_dirs=[tree / "extra"])
    assert packed["options"] == ["-O2"]
    assert packed["custom"] == {"kept": True}
    headers = {h["name"]: h["text"] for h in packed["headers"]}
    assert set(headers) == {"ops/scale.h", "factor.h", "more.h"}  # <vector>: the toolchain's
    assert headers["factor.h"] == "constexpr int kFactor = 3;\n"
    # JSON text in, the same packed spec out; one dir may be given as a str.
    assert kcache.pack_headers(json.dumps(spec), str(tree / "extra")) == packed


def test_errors_raise_with_the_reason(tree):
    (tree / "inc" / "ops" / "bad.h").write_text('#include "../../secret.h"\n')
    with pytest.raises(kcache.KcacheError) as e:
        kcache.pack_headers(_spec("#include <ops/bad.h>\n", ["-I", str(tree / "inc")]))
    assert e.value.status == kcache.Status.ERR_INVALID
    assert "ops/bad.h:1" in str(e.value) and ".." in str(e.value)
    with pytest.raises(kcache.KcacheError, match="not a JSON object"):
        kcache.pack_headers("[1, 2]")


def test_a_packed_spec_compiles_where_the_include_dir_is_refused(daemon, tree):
    (tree / "inc" / "ops" / "scale.h").write_text(
        '#pragma once\n#include "factor.h"\ninline int scale(int x) { return x * kFactor; }\n'
    )
    spec = _spec(
        '#include <ops/scale.h>\nextern "C" int scaled(int x) { return scale(x); }\n', ["-I", str(tree / "inc")]
    )
    c = kcache.Client(daemon.url, fail_open=False, timeout_ms=30000)
    with pytest.raises(kcache.KcacheError, match="host path"):
        c.submit(spec)
    result = c.get_or_compile("py-packed", kcache.pack_headers(spec))
    assert result.outcome == "compiled", result.info
    assert result.binary.startswith(b"\x7fELF")
