"""pages.py -- GPU memory laid out on 2 MiB pages drawn at random from a
reservoir (CUDA's virtual memory API, through ctypes), for
scripts/bench-placement.

On the H100 a kernel's time can follow the physical pages under its
buffers: one layernorm's 64 MiB input on six physical allocations, each
mapped at three virtual ranges, read 54.5-55.0 us on three of them and
61.0-66.4 us on the others, whatever the virtual range (MODES=vmm).  This
module asks whether a fine mix of pages evens that out (MODES=mixed): a
Reservoir holds granules created one by one with cuMemCreate; an
allocation reserves a virtual range and maps granules taken from it in
random order; Reservoir.allocator() makes a torch allocator of it for
torch.cuda.MemPool.  Measured on the H100 it does not: a naive transpose
ran 5-10% slower on mixed pages and its pools 8-11% apart, so the
evaluator does not use it (docs/BENCHMARKS.md, session 9).
"""

import ctypes
import os
import random
import threading

__all__ = ["Reservoir", "PagesError", "supported"]

_LOC_DEVICE = 1            # CU_MEM_LOCATION_TYPE_DEVICE
_ALLOC_PINNED = 1          # CU_MEM_ALLOCATION_TYPE_PINNED
_ACCESS_RW = 3             # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_ATTR_VMM = 102            # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED


class PagesError(RuntimeError):
    """A CUDA driver call failed, or the reservoir is at its cap."""


class _Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _Flags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):     # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Loc), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _Flags)]


class _Access(ctypes.Structure):   # CUmemAccessDesc
    _fields_ = [("location", _Loc), ("flags", ctypes.c_int)]


_U64 = ctypes.c_ulonglong
_SZ = ctypes.c_size_t
_ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)


def _lib():
    return ctypes.CDLL("libcuda.so.1")


def _device_memory(ordinal):
    """(libcuda, allocation properties, read-write access descriptor,
    granularity in bytes) for device memory on `ordinal`."""
    lib = _lib()
    prop = _Prop()
    prop.type = _ALLOC_PINNED
    prop.location.type = _LOC_DEVICE
    prop.location.id = ordinal
    access = _Access()
    access.location.type = _LOC_DEVICE
    access.location.id = ordinal
    access.flags = _ACCESS_RW
    g = _SZ()
    rc = lib.cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop), 0)
    if rc != 0:
        raise PagesError("cuMemGetAllocationGranularity failed (CUDA error %d)" % rc)
    return lib, prop, access, g.value


def supported(ordinal):
    """Whether device `ordinal` supports the virtual memory API (the caller
    has initialized CUDA, e.g. through torch)."""
    try:
        lib = _lib()
        dev, v = ctypes.c_int(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            return False
        return lib.cuDeviceGetAttribute(ctypes.byref(v), _ATTR_VMM, dev) == 0 and v.value == 1
    except OSError:
        return False


class Reservoir:
    """Granules of device memory on `ordinal`, at most `cap` bytes of them.

    `initial` bytes are created at once (a wide draw of the device's free
    memory); the reservoir grows, doubling, up to `cap` when an allocation
    finds too few free granules.  Not thread-safe beyond its own lock; all
    methods run under it.  Owns its granules and mappings; close() releases
    them (the CUDA context must still be alive)."""

    def __init__(self, ordinal, initial, cap, seed=None):
        self.lib, self.prop, self.access, self.gran = _device_memory(ordinal)
        self.ordinal = ordinal
        self.cap = max(cap // self.gran, 1)
        self.handles = []          # every granule created
        self.free = []             # granules not mapped
        self.maps = {}             # virtual address -> (bytes reserved, granules)
        self.lock = threading.Lock()
        self.rng = random.Random(seed if seed is not None else os.urandom(16))
        self._alloc_cb = _ALLOC_FN(self._alloc_entry)
        self._free_cb = _FREE_FN(self._free_entry)
        self._torch_allocator = None
        self.error = ""            # the last failure inside a callback
        with self.lock:
            self._grow(min(max(initial // self.gran, 1), self.cap))

    @staticmethod
    def _ck(rc, what):
        if rc != 0:
            raise PagesError("%s failed (CUDA error %d)" % (what, rc))

    def _grow(self, n):
        n = min(n, self.cap - len(self.handles))
        if n <= 0:
            raise PagesError("page reservoir at its cap of %d MiB" % (self.cap * self.gran >> 20))
        for _ in range(n):
            h = _U64()
            self._ck(self.lib.cuMemCreate(ctypes.byref(h), _SZ(self.gran), ctypes.byref(self.prop), _U64(0)),
                     "cuMemCreate")
            self.handles.append(h.value)
            self.free.append(h.value)

    def granules(self, nbytes):
        return max((nbytes + self.gran - 1) // self.gran, 1)

    def alloc(self, nbytes):
        """A device address with `nbytes` mapped read-write, on granules
        taken from the reservoir in random order."""
        with self.lock:
            n = self.granules(nbytes)
            if len(self.free) < n:
                self._grow(max(n - len(self.free), len(self.handles)))
            # A random choice from the whole free list, then mapped in
            # random order: neighbours in the buffer are not neighbours in
            # the reservoir.
            pick = self.rng.sample(self.free, n)
            chosen = set(pick)
            self.free = [h for h in self.free if h not in chosen]
            va = _U64()
            size = n * self.gran
            try:
                self._ck(self.lib.cuMemAddressReserve(ctypes.byref(va), _SZ(size), _SZ(0), _U64(0), _U64(0)),
                         "cuMemAddressReserve")
            except PagesError:
                self.free.extend(pick)
                raise
            mapped = 0
            try:
                for i, h in enumerate(pick):
                    self._ck(self.lib.cuMemMap(_U64(va.value + i * self.gran), _SZ(self.gran), _SZ(0),
                                               _U64(h), _U64(0)), "cuMemMap")
                    mapped += 1
                self._ck(self.lib.cuMemSetAccess(_U64(va.value), _SZ(size), ctypes.byref(self.access), _SZ(1)),
                         "cuMemSetAccess")
            except PagesError:
                self._unmap(va.value, mapped)
                self.lib.cuMemAddressFree(_U64(va.value), _SZ(size))
                self.free.extend(pick)
                raise
            self.maps[va.value] = (size, pick)
            return va.value

    def _unmap(self, va, n):
        for i in range(n):
            self.lib.cuMemUnmap(_U64(va + i * self.gran), _SZ(self.gran))

    def release(self, va):
        """Unmaps an address alloc() returned; its granules go back to the
        reservoir.  The device is synchronized first: nothing may still use
        them."""
        with self.lock:
            ent = self.maps.pop(va, None)
            if ent is None:
                raise PagesError("release of an address this reservoir did not map: %#x" % va)
            size, pick = ent
            self.lib.cuCtxSynchronize()
            self._unmap(va, len(pick))
            self.lib.cuMemAddressFree(_U64(va), _SZ(size))
            self.free.extend(pick)

    def _alloc_entry(self, size, device, stream):
        try:
            return self.alloc(int(size))
        except Exception as e:     # torch reports an out-of-memory error
            self.error = str(e)
            return None

    def _free_entry(self, ptr, size, device, stream):
        try:
            self.release(int(ptr))
        except Exception as e:
            self.error = str(e)

    def allocator(self):
        """This reservoir as a torch allocator for torch.cuda.MemPool
        (the callbacks live as long as the reservoir)."""
        if self._torch_allocator is None:
            import torch

            self._torch_allocator = torch._C._cuda_customAllocator(
                ctypes.cast(self._alloc_cb, ctypes.c_void_p).value,
                ctypes.cast(self._free_cb, ctypes.c_void_p).value)
        return self._torch_allocator

    def stats(self):
        with self.lock:
            return {"granule_bytes": self.gran, "granules": len(self.handles),
                    "free": len(self.free), "mapped": len(self.maps)}

    def close(self):
        """Unmaps everything and releases the granules."""
        with self.lock:
            self.lib.cuCtxSynchronize()
            for va, (size, pick) in list(self.maps.items()):
                self._unmap(va, len(pick))
                self.lib.cuMemAddressFree(_U64(va), _SZ(size))
            self.maps.clear()
            for h in self.handles:
                self.lib.cuMemRelease(_U64(h))
            self.handles, self.free = [], []


class Arena:
    """One physical allocation of `size` bytes (a single cuMemCreate),
    mapped at one virtual range; allocator() hands out its memory in
    order (bump allocation, granule-aligned, never reused), so buffers
    made in it sit at the same offsets from one another wherever the
    driver placed the arena."""

    def __init__(self, ordinal, size):
        self.lib, self.prop, self.access, self.gran = _device_memory(ordinal)
        self.size = (size + self.gran - 1) // self.gran * self.gran
        h, va = _U64(), _U64()
        Reservoir._ck(self.lib.cuMemCreate(ctypes.byref(h), _SZ(self.size), ctypes.byref(self.prop), _U64(0)),
                      "cuMemCreate")
        self.handle = h.value
        Reservoir._ck(self.lib.cuMemAddressReserve(ctypes.byref(va), _SZ(self.size), _SZ(0), _U64(0), _U64(0)),
                      "cuMemAddressReserve")
        self.va = va.value
        Reservoir._ck(self.lib.cuMemMap(_U64(self.va), _SZ(self.size), _SZ(0), _U64(self.handle), _U64(0)),
                      "cuMemMap")
        Reservoir._ck(self.lib.cuMemSetAccess(_U64(self.va), _SZ(self.size), ctypes.byref(self.access), _SZ(1)),
                      "cuMemSetAccess")
        self.used = 0
        self.error = ""
        self._alloc_cb = _ALLOC_FN(self._alloc_entry)
        self._free_cb = _FREE_FN(lambda ptr, size, device, stream: None)
        self._torch_allocator = None

    def _alloc_entry(self, size, device, stream):
        n = (int(size) + self.gran - 1) // self.gran * self.gran
        if self.used + n > self.size:
            self.error = "arena of %d MiB full" % (self.size >> 20)
            return None
        p = self.va + self.used
        self.used += n
        return p

    allocator = Reservoir.allocator

    def close(self):
        self.lib.cuCtxSynchronize()
        self.lib.cuMemUnmap(_U64(self.va), _SZ(self.size))
        self.lib.cuMemAddressFree(_U64(self.va), _SZ(self.size))
        self.lib.cuMemRelease(_U64(self.handle))
