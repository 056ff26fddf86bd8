"""The shipped type stubs describe the runtime module: same names, same parameters."""

import ast
import inspect
from pathlib import Path

import dlbridge
from dlbridge import _dlbridge

STUB = Path(dlbridge.__file__).with_name("_dlbridge.pyi")
# The buffer slots appear as a method from Python 3.12 on only.
STUB_ONLY = {"__buffer__"}
# Special methods the Tensor type defines itself (pickling and copying), documented in the stub.
SPECIAL = {"__reduce_ex__", "__copy__", "__deepcopy__"}


def stub_tree():
    return ast.parse(STUB.read_text())


def public_functions(nodes):
    return {
        n.name: n for n in nodes if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
    }


def test_package_ships_py_typed_and_stubs():
    assert STUB.is_file()
    assert Path(dlbridge.__file__).with_name("py.typed").is_file()


def test_module_functions_match_the_stubs():
    tree = stub_tree()
    stubbed = public_functions(tree.body)
    assert set(stubbed) == {
        "from_dlpack",
        "empty",
        "arange",
        "empty_shared",
        "to_shared",
        "from_shared",
        "shm_sweep",
        "diagnostics",
    }
    for name, node in stubbed.items():
        runtime = inspect.signature(getattr(_dlbridge, name))
        stub_params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        assert list(runtime.parameters) == stub_params, name


def test_tensor_members_match_the_stubs():
    (tensor,) = [n for n in stub_tree().body if isinstance(n, ast.ClassDef) and n.name == "Tensor"]
    stubbed = {n.name for n in tensor.body if isinstance(n, ast.FunctionDef)}
    stubbed |= {n.target.id for n in tensor.body if isinstance(n, ast.AnnAssign)}
    runtime = {
        name
        for name in dir(dlbridge.Tensor)
        if not name.startswith("_")
        or name.startswith("__dlpack")
        or name in ("__c_dlpack_exchange_api__", "__cuda_array_interface__")
        or (name in SPECIAL and name in vars(dlbridge.Tensor))
    }
    assert stubbed - STUB_ONLY == runtime - STUB_ONLY
    dlpack = next(
        n for n in tensor.body if isinstance(n, ast.FunctionDef) and n.name == "__dlpack__"
    )
    assert [a.arg for a in dlpack.args.kwonlyargs] == list(
        inspect.signature(dlbridge.Tensor.__dlpack__).parameters
    )[1:]
