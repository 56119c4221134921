"""kiln <-> PyTorch or NumPy through DLPack, without copies (issue 21). Loads
tests/dlpack/dlpack_shim.cpp (built as libkiln_dlpack_shim.so) with ctypes: the other library
reads what kiln exports and kiln reads what it exports, on the CPU and, with PyTorch and a GPU,
on CUDA. Exit status 0 when every check holds, 77 when the library is not installed.

    python3 tests/dlpack/dlpack_roundtrip.py build/tests/libkiln_dlpack_shim.so torch
"""
import ctypes
import importlib
import sys

shim, which = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "torch")
try:
    mod = importlib.import_module(which)
except ImportError:
    print(f"{which} is not installed: skipped")
    sys.exit(77)

lib = ctypes.CDLL(shim)
lib.kiln_dlpack_export.restype = ctypes.c_void_p
lib.kiln_dlpack_export.argtypes = [ctypes.c_int]
lib.kiln_dlpack_import_sum.restype = ctypes.c_double
lib.kiln_dlpack_import_sum.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.POINTER(ctypes.c_int)]
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.restype = ctypes.c_void_p
capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_rename = ctypes.pythonapi.PyCapsule_SetName
capsule_rename.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Exported:
    """kiln's capsule, offered through the __dlpack__ protocol (what from_dlpack takes)."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (2, 0) if self.device == "cuda" else (1, 0)


# What the library under test gives: a random matrix's transpose, a bool vector, an array's
# address, sum, strides in elements and values.
if which == "torch":
    devices = ["cpu"] + (["cuda"] if mod.cuda.is_available() else [])
    random_t = lambda dev: mod.randn(5, 7, device=dev).t()
    bools = lambda dev: mod.arange(6, device=dev) % 2 == 0
    address = lambda a: a.data_ptr()
    total = lambda a: a.double().sum().item()
    elem_strides = lambda a: a.stride()
    values = lambda a: a.cpu().tolist()
    expected = (mod.arange(12, dtype=mod.float32).reshape(3, 4) * 0.5).t().tolist()
else:  # numpy: the CPU only
    devices = ["cpu"]
    random_t = lambda dev: mod.random.rand(5, 7).T
    bools = lambda dev: mod.arange(6) % 2 == 0
    address = lambda a: a.ctypes.data
    total = lambda a: float(a.sum())
    elem_strides = lambda a: tuple(s // a.itemsize for s in a.strides)
    values = lambda a: a.tolist()
    expected = (mod.arange(12, dtype=mod.float32).reshape(3, 4) * 0.5).T.tolist()

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def import_into_kiln(a):
    capsule = a.__dlpack__()
    ptr = capsule_pointer(capsule, b"dltensor")
    capsule_rename(capsule, b"used_dltensor")  # kiln owns it now and calls its deleter
    same = ctypes.c_int(0)
    s = lib.kiln_dlpack_import_sum(ptr, ctypes.c_void_p(address(a)), ctypes.byref(same))
    return s, same.value == 1


for dev in devices:
    p = lib.kiln_dlpack_export(1 if dev == "cuda" else 0)
    check(bool(p), f"{dev}: kiln exports")
    t = mod.from_dlpack(Exported(capsule_new(p, b"dltensor", None), dev))
    check(elem_strides(t) == (1, 4), f"{dev}: {which} sees strides {elem_strides(t)}")
    check(values(t) == expected, f"{dev}: {which} reads kiln's values")
    del t  # the export's deleter releases kiln's handle
    src = random_t(dev)
    s, same = import_into_kiln(src)
    check(same, f"{dev}: kiln reads {which}'s memory without a copy")
    check(abs(s - total(src)) < 1e-9 * max(1.0, abs(s)), f"{dev}: kiln's sum {s} matches")
    s, _ = import_into_kiln(bools(dev))
    check(s == 3.0, f"{dev}: bool arrays cross as bool ({s})")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
