"""A published autotune winner checked and timed outside kcache, with PyTorch.

Used by gpu_service_autotune.py on the GPU host:
  verify SEARCH.json CUBIN PARAMS.json   launch the CUBIN (ctypes, the driver
      API) on the search's benchmark arguments, compare its outputs with a
      float64 reference computed by torch; prints one JSON line
  vendor SEARCH.json                     time the vendor kernel for the same
      problem (cuBLAS SGEMM through torch.matmul with TF32 off, cuBLAS's bf16
      GEMM for the tensor-core templates, or torch.sum)
      like kcache's benchmark times a variant: a CUDA event pair around each
      call, the median of the repeats; prints one JSON line

The search's own files say what is run: its benchmark's args, shapes, launch
and tolerance. Expressions are the subset the bench/autotune/ searches use
(names, integers, + - * / %, parentheses, ceil_div, min, max).
"""

import ast
import ctypes
import json
import statistics
import sys

import torch


def evaluate(expr, names):
    """An integer expression of the autotune spec language (a subset)."""
    tree = ast.parse(str(expr), mode="eval")

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return int(names[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            # C's division and remainder: toward zero
            q = (abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1)
                 if isinstance(node.op, (ast.Div, ast.Mod)) else 0)
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b, ast.Div: q, ast.Mod: a - q * b}
            return ops[type(node.op)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = [ev(a) for a in node.args]
            funcs = {"ceil_div": lambda x, y: -(-x // y), "min": min, "max": max}
            return funcs[node.func.id](*args)
        raise ValueError(f"expression {expr!r}: unsupported {ast.dump(node)}")

    return ev(tree)


TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32,
                "i64": torch.int64, "bf16": torch.bfloat16, "f16": torch.float16}
FLOATS = ("f32", "f64", "bf16", "f16")
# C = A * B^T with A (M x K) and B (N x K) row-major: the bf16 tensor-core
# templates' contract (gemm_tc.cu, gemm_wgmma.cu).
GEMM_TN = ("gemm_bf16", "gemm_bf16_wgmma")
CTYPES = {"f32": ctypes.c_float, "f64": ctypes.c_double, "i32": ctypes.c_int32,
          "i64": ctypes.c_int64}


def make_args(bench, params):
    """The benchmark's arguments on the GPU: name -> tensor or scalar value."""
    scope = dict(bench.get("shapes", {}))
    scope.update(params)
    args = []
    for a in bench["args"]:
        dtype = a.get("dtype", "f32")
        if "scalar" in a:
            args.append(("scalar", None, dtype, evaluate(a["scalar"], scope)))
            continue
        count = evaluate(a["count"], scope)
        lo, hi = a.get("range", [-1, 1])
        gen = torch.Generator(device="cuda").manual_seed(int(a.get("seed", 1)))
        if a.get("output"):
            t = torch.zeros(count, dtype=TORCH_DTYPES[dtype], device="cuda")
        elif dtype in FLOATS:  # drawn in float32, then rounded to the buffer's type
            t = torch.rand(count, generator=gen, dtype=torch.float32, device="cuda")
            t = (t * (hi - lo) + lo).to(TORCH_DTYPES[dtype])
        else:
            t = torch.randint(lo, hi + 1, (count,), generator=gen, dtype=TORCH_DTYPES[dtype],
                              device="cuda")
        args.append(("buffer", a["buffer"], dtype, t))
    return scope, args


def reference(entry, scope, named):
    """The right answer in float64, per template entry point."""
    if entry == "sgemm":
        m, n, k = scope["M"], scope["N"], scope["K"]
        a, b = named["A"].view(m, k).double(), named["B"].view(k, n).double()
        return "C", (a @ b).view(-1)
    if entry == "row_sum":
        m, n = scope["M"], scope["N"]
        return "Y", named["X"].view(m, n).double().sum(dim=1)
    if entry in GEMM_TN:
        m, n, k = scope["M"], scope["N"], scope["K"]
        a, b = named["A"].view(m, k).double(), named["B"].view(n, k).double()
        return "C", (a @ b.T).view(-1)
    raise SystemExit(f"no reference for entry {entry!r}: add one to {__file__}")


class Driver:
    """The few CUDA driver calls a launch needs, on torch's context."""

    def __init__(self):
        self.cuda = ctypes.CDLL("libcuda.so.1")
        c = self.cuda
        vp, pvp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        c.cuCtxGetCurrent.argtypes = [pvp]
        c.cuModuleLoadData.argtypes = [pvp, ctypes.c_char_p]
        c.cuModuleGetFunction.argtypes = [pvp, vp, ctypes.c_char_p]
        c.cuLaunchKernel.argtypes = [vp] + [ctypes.c_uint] * 7 + [vp, pvp, pvp]
        c.cuModuleUnload.argtypes = [vp]
        c.cuFuncSetAttribute.argtypes = [vp, ctypes.c_int, ctypes.c_int]
        torch.zeros(1, device="cuda")  # torch's primary context, current on this thread
        ctx = ctypes.c_void_p()
        self.check(c.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise SystemExit("no current CUDA context after torch's initialization")

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise SystemExit(f"{what}: CUresult {rc}")

    def launch(self, cubin, entry, grid, block, shared, args):
        c = self.cuda
        module, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(c.cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
        self.check(c.cuModuleGetFunction(ctypes.byref(fn), module, entry.encode()),
                   "cuModuleGetFunction")
        if shared > 48 * 1024:  # over the default: opted into, as kcache's benchmark does
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
            self.check(c.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared),
                       "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        values = []
        for kind, _, dtype, v in args:
            values.append(ctypes.c_void_p(v.data_ptr()) if kind == "buffer" else CTYPES[dtype](v))
        params = (ctypes.c_void_p * len(values))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(c.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, shared, stream, params, None),
                   "cuLaunchKernel")
        torch.cuda.synchronize()
        self.check(c.cuModuleUnload(module), "cuModuleUnload")


def verify(search_path, cubin_path, params_path):
    spec = json.load(open(search_path))
    params = json.load(open(params_path))
    bench = spec["autotune"]["benchmark"]
    entry = spec["name_expressions"][0]
    scope, args = make_args(bench, params)
    named = {name: v for kind, name, _, v in args if kind == "buffer"}
    launch = bench["launch"]
    grid, block = evaluate(launch["grid"], scope), evaluate(launch["block"], scope)
    shared = evaluate(launch.get("shared_bytes", "0"), scope)
    Driver().launch(open(cubin_path, "rb").read(), entry, grid, block, shared, args)
    out_name, want = reference(entry, scope, named)
    got = named[out_name].double()
    tol = float(bench.get("tolerance", 1e-3))
    err = (got - want).abs()
    allowed = tol * (1 + want.abs())
    bad = int((err > allowed).sum().item())
    result = {"entry": entry, "params": params, "output": out_name, "elements": got.numel(),
              "max_abs_error": err.max().item(), "tolerance": tol, "over_tolerance": bad,
              "ok": bad == 0 and bool(torch.isfinite(got).all().item())}
    if entry == "sgemm":  # and against cuBLAS's own float32 answer
        m, n, k = scope["M"], scope["N"], scope["K"]
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        cublas = (named["A"].view(m, k) @ named["B"].view(k, n)).view(-1).double()
        result["max_abs_error_vs_cublas"] = (got - cublas).abs().max().item()
        result["cublas_max_abs_error"] = (cublas - want).abs().max().item()
    if entry in GEMM_TN:  # and against cuBLAS's bf16 answer (fp32 accumulation, rounded to bf16)
        m, n, k = scope["M"], scope["N"], scope["K"]
        cublas = (named["A"].view(m, k) @ named["B"].view(n, k).T).view(-1).double()
        result["max_abs_error_vs_cublas"] = (got - cublas).abs().max().item()
        result["cublas_max_abs_error"] = (cublas - want).abs().max().item()
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def vendor(search_path):
    spec = json.load(open(search_path))
    bench = spec["autotune"]["benchmark"]
    entry = spec["name_expressions"][0]
    scope, args = make_args(bench, {})
    named = {name: v for kind, name, _, v in args if kind == "buffer"}
    if entry == "sgemm":
        m, n, k = scope["M"], scope["N"], scope["K"]
        # cuBLAS SGEMM in full FP32, not TF32 on the tensor cores
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        a, b, c = named["A"].view(m, k), named["B"].view(k, n), named["C"].view(m, n)
        name = "cuBLAS SGEMM (torch.matmul, TF32 off)"
        call = lambda: torch.matmul(a, b, out=c)  # noqa: E731
    elif entry in GEMM_TN:
        m, n, k = scope["M"], scope["N"], scope["K"]
        a, b, c = named["A"].view(m, k), named["B"].view(n, k), named["C"].view(m, n)
        name = "cuBLAS bf16 GEMM (torch.matmul, A @ B.T)"
        call = lambda: torch.matmul(a, b.T, out=c)  # noqa: E731
    elif entry == "row_sum":
        m, n = scope["M"], scope["N"]
        x, y = named["X"].view(m, n), named["Y"]
        name = "torch.sum(dim=1)"
        call = lambda: torch.sum(x, dim=1, out=y)  # noqa: E731
    else:
        raise SystemExit(f"no vendor kernel for entry {entry!r}")
    for _ in range(max(2, int(bench.get("warmup", 1)))):
        call()
    times = []
    for _ in range(max(10, int(bench.get("repeats", 5)))):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    print(json.dumps({"entry": entry, "vendor": name, "median_us": statistics.median(times),
                      "runs": len(times), "device": torch.cuda.get_device_name(0),
                      "torch": torch.__version__}))
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "verify":
        return verify(argv[2], argv[3], argv[4])
    if len(argv) == 3 and argv[1] == "vendor":
        return vendor(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
