"""Pure Python cannot crash or hang dlbridge: re-entrant imports from a producer type's attribute
lookups, a second thread importing meanwhile, and attempts to mutate `dlbridge.Tensor` or make
instances of it that dlbridge never initialised. Each case runs in a child process with a timeout,
so that a crash or a deadlock fails the test instead of the suite."""

import pytest

import dlbridge
from helpers import run_python


def test_a_metaclass_that_imports_re_entrantly_during_the_type_probe_does_not_deadlock():
    out = run_python(
        """
        import numpy as np, dlbridge
        from helpers import Forwarding

        class Meta(type):
            def __getattr__(cls, name):
                # The first probe of the type's exchange API re-enters from_dlpack with another
                # instance of the same, not yet cached, type.
                if name == "__dlpack_c_exchange_api__" and not cls.inner:
                    cls.inner = True
                    cls.seen = dlbridge.from_dlpack(cls(np.arange(3.0))).tolist()
                raise AttributeError(name)

        class Reentrant(Forwarding, metaclass=Meta):
            inner = False

        t = dlbridge.from_dlpack(Reentrant(np.arange(4.0)))
        print(t.tolist(), Reentrant.seen)
        # Both the outer and the inner answers are usable afterwards: the cache is consistent.
        print(dlbridge.from_dlpack(Reentrant(np.arange(2.0))).tolist())
        """
    )
    assert out.splitlines() == ["[0.0, 1.0, 2.0, 3.0] [0.0, 1.0, 2.0]", "[0.0, 1.0]"]


def test_a_property_on_the_metaclass_that_imports_re_entrantly_does_not_deadlock():
    out = run_python(
        """
        import numpy as np, dlbridge
        from helpers import Forwarding

        class Meta(type):
            @property
            def requires_grad(cls):
                # Looked up on the type while it is probed: re-enter with a numpy array (another
                # type, probed from inside the first probe).
                cls.seen = dlbridge.from_dlpack(np.arange(2.0)).tolist()
                return False

        class Producer(Forwarding, metaclass=Meta):
            pass

        print(dlbridge.from_dlpack(Producer(np.arange(3.0))).tolist(), Producer.seen)
        """
    )
    assert out == "[0.0, 1.0, 2.0] [0.0, 1.0]"


def test_a_second_thread_importing_while_a_type_probe_waits_does_not_deadlock():
    out = run_python(
        """
        import threading
        import numpy as np, dlbridge
        from helpers import Forwarding

        started, release = threading.Event(), threading.Event()
        results = {}

        class Meta(type):
            def __getattr__(cls, name):
                if name == "__dlpack_c_exchange_api__":
                    started.set()
                    release.wait(10)   # lets the GIL go, as any Python code may
                raise AttributeError(name)

        class Slow(Forwarding, metaclass=Meta):
            pass

        def slow_import():
            results["slow"] = dlbridge.from_dlpack(Slow(np.arange(3.0))).tolist()

        thread = threading.Thread(target=slow_import)
        thread.start()
        assert started.wait(10)
        # The first slot of the type cache is being probed by the other thread: this import
        # must not wait for it (it holds the GIL the other thread needs).
        results["numpy"] = dlbridge.from_dlpack(np.arange(2.0)).tolist()
        release.set()
        thread.join(10)
        print(results["numpy"], results["slow"])
        """,
        timeout=40,
    )
    assert out == "[0.0, 1.0] [0.0, 1.0, 2.0]"


def test_the_tensor_type_is_immutable():
    ty = dlbridge.Tensor
    assert ty.__flags__ & (1 << 8), "Py_TPFLAGS_IMMUTABLETYPE"
    for name, value in [
        ("__new__", staticmethod(lambda c, *a, **k: object.__new__(c))),
        ("shape", 1),
        ("__dlpack__", None),
        ("__dlpack_c_exchange_api__", None),
        ("__del__", lambda self: None),
    ]:
        with pytest.raises(TypeError, match="immutable type 'dlbridge.Tensor'"):
            setattr(ty, name, value)
    with pytest.raises(TypeError, match="immutable type 'dlbridge.Tensor'"):
        del ty.__dlpack__
    with pytest.raises(TypeError, match="cannot create 'dlbridge.Tensor' instances directly"):
        ty()
    with pytest.raises(TypeError, match=r"object.__new__\(dlbridge.Tensor\) is not safe"):
        object.__new__(ty)
    with pytest.raises(TypeError, match="not an acceptable base type"):
        type("Sub", (ty,), {})
    t = dlbridge.arange(3)

    class Other:
        pass

    with pytest.raises(TypeError):
        t.__class__ = Other
    assert t.tolist() == [0.0, 1.0, 2.0]


def test_the_reported_new_replacement_is_refused_and_the_process_survives():
    out = run_python(
        """
        import dlbridge, numpy as np
        try:
            dlbridge.Tensor.__new__ = staticmethod(lambda c, *a, **k: object.__new__(c))
        except TypeError as e:
            print("refused:", e)
        try:
            t = dlbridge.Tensor()
            del t   # a zero-filled instance crashed here
            print("made and dropped an instance")
        except TypeError as e:
            print("no instance:", e)
        print(np.from_dlpack(dlbridge.arange(3)).tolist())
        """
    )
    assert "refused: cannot set '__new__' attribute of immutable type 'dlbridge.Tensor'" in out
    assert "no instance: cannot create 'dlbridge.Tensor' instances directly" in out
    assert out.splitlines()[-1] == "[0.0, 1.0, 2.0]"


def test_an_uninitialised_instance_is_refused_by_every_entry_point():
    """Defence in depth: with the type made mutable again behind the interpreter's back (ctypes),
    the reported exploit yields a zero-filled instance; every entry point must refuse it with a
    TypeError, and dropping it must not crash."""
    out = run_python(
        """
        import copy, ctypes, pickle, sys
        import numpy as np, torch, dlbridge

        ty = dlbridge.Tensor
        flags = ctypes.c_ulong.from_address(id(ty) + 21 * ctypes.sizeof(ctypes.c_void_p))
        assert flags.value == ty.__flags__, "tp_flags not found"
        flags.value &= ~(1 << 8)
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(ty))
        ty.__new__ = staticmethod(lambda c, *a, **k: object.__new__(c))
        t = ty()

        attempts = {
            "repr": lambda: repr(t),
            "shape": lambda: t.shape,
            "strides": lambda: t.strides,
            "dtype": lambda: t.dtype,
            "device": lambda: t.device,
            "data_ptr": lambda: t.data_ptr,
            "readonly": lambda: t.readonly,
            "tolist": lambda: t.tolist(),
            "copy": lambda: t.copy(),
            "__dlpack__": lambda: t.__dlpack__(),
            "__dlpack_device__": lambda: t.__dlpack_device__(),
            "memoryview": lambda: memoryview(t),
            "numpy.from_dlpack": lambda: np.from_dlpack(t),
            "torch.from_dlpack": lambda: torch.from_dlpack(t),
            "dlbridge.from_dlpack": lambda: dlbridge.from_dlpack(t),
            "pickle": lambda: pickle.dumps(t, protocol=5),
            "copy.copy": lambda: copy.copy(t),
            "copy.deepcopy": lambda: copy.deepcopy(t),
            "to_shared": lambda: dlbridge.to_shared(t),
        }
        for name, attempt in attempts.items():
            try:
                attempt()
            except Exception as e:   # torch and numpy may wrap the error in their own type
                text = f"{type(e).__name__}: {e}"
                assert "never initialised" in text, (name, text)
                print(name, "refused")
            else:
                raise AssertionError(f"{name} accepted an uninitialised tensor")
        del t
        import gc; gc.collect()
        print("survived")
        """
    )
    lines = out.splitlines()
    assert lines[-1] == "survived"
    assert len(lines) == 20, out
