"""DLPack structs in ctypes, to hand devspan hand-made capsules with counted deleters."""

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", LEGACY_DELETER),
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", VERSIONED_DELETER),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

KDLCPU, KDLCUDA = 1, 2
INT, UINT, FLOAT, BFLOAT, BOOL = 0, 1, 2, 4, 6

_new = ctypes.pythonapi.PyCapsule_New
_new.restype = ctypes.py_object
_new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype = ctypes.c_char_p
_name.argtypes = [ctypes.py_object]

# Capsule names must outlive the capsules.
NAMES = {n: ctypes.create_string_buffer(n) for n in (b"dltensor", b"dltensor_versioned", b"used_dltensor", b"other")}


def capsule_name(cap):
    return _name(cap)


class Managed:
    """A hand-made managed tensor; `deleted` counts deleter calls."""

    def __init__(self, versioned, shape, strides=None, code=FLOAT, bits=32, lanes=1,
                 device=(KDLCUDA, 0), data=0x7F0000000000, byte_offset=0, major=1, flags=0):
        self.deleted = 0
        n = len(shape)
        self.shape = (ctypes.c_int64 * max(n, 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * max(n, 1))(*strides)
        t = DLTensor()
        t.data = data
        t.device = DLDevice(*device)
        t.ndim = n
        t.dtype = DLDataType(code, bits, lanes)
        t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = None if self.strides is None else ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset

        def count(_):
            self.deleted += 1

        if versioned:
            self.deleter = VERSIONED_DELETER(count)
            self.m = DLManagedTensorVersioned(DLPackVersion(major, 1), None, self.deleter, flags, t)
        else:
            self.deleter = LEGACY_DELETER(count)
            self.m = DLManagedTensor(t, None, self.deleter)
        self.versioned = versioned

    def capsule(self, name=None):
        if name is None:
            name = b"dltensor_versioned" if self.versioned else b"dltensor"
        ptr = ctypes.addressof(self.m)
        return _new(ptr, None if name == b"" else ctypes.addressof(NAMES[name]), None)
