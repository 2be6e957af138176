import ctypes
import sys

try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print("nolib", e)
    sys.exit(3)
rc = lib.cuInit(0)
name = ctypes.c_char_p()
lib.cuGetErrorName(rc, ctypes.byref(name))
n = ctypes.c_int(0)
if rc == 0:
    lib.cuDeviceGetCount(ctypes.byref(n))
print(rc, (name.value or b"").decode() or "?", n.value)
