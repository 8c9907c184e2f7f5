//! The driver boundary: the only module that calls cudarc's raw driver API (`sys` and
//! `result`, and NVRTC's `sys`), and NCCL ([`nccl`], feature `nccl`). Everything else goes through the functions here or through cudarc's safe types
//! (`CudaContext`, `CudaStream`, `CudaSlice`, `CudaEvent`, `CudaModule`).
//!
//! Every function returns [`Result`]; a failed call is `ErrorKind::Driver`, whose `source()` is
//! the driver's error. The calls that devspan's own tests make fail (allocations and host <->
//! device copies) first pass through [`fault::check`], the one fault-injection mechanism.
//!
//! What devspan keeps per context (loaded kernels, probe streams, peer access, deferred frees)
//! lives in that context's [`runtime::Runtime`].
//!
//! Handles (`CUstream`, `CUevent`, `CUcontext`, `CUmemoryPool`) are the driver's; the functions
//! taking them are `unsafe` where the driver would use a stale handle, and say which handles
//! must be live.

pub(crate) mod fault;
#[cfg(feature = "nccl")]
pub(crate) mod nccl;
pub(crate) mod runtime;

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DeviceRepr, DriverError, PinnedHostSlice, ValidAsZeroBits,
};
use cudarc::driver::{result, sys};

use crate::error::Result;
use fault::{Call, Fault};

pub(crate) use sys::{
    CUcontext, CUdevice_attribute, CUevent, CUfunction_attribute, CUmemoryPool, CUresult, CUstream,
    CUstreamCaptureMode, CUstreamCaptureStatus,
};

/// `Ok(())` for `CUDA_SUCCESS`, the driver error otherwise.
fn check(r: sys::CUresult) -> Result<()> {
    Ok(r.result()?)
}

/// The bytes of `n` elements of `T`, saturating: what a fault site reports for an allocation
/// (an impossible size is refused by the allocation itself).
fn bytes_of<T>(n: usize) -> usize {
    n.saturating_mul(size_of::<T>())
}

/// Whether the driver library (libcuda) can be loaded. Always `false` under Miri, which cannot
/// load a shared library.
pub(crate) fn library_present() -> bool {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library by its known names
    // and drops the handle; it has no preconditions.
    !cfg!(miri) && unsafe { sys::is_culib_present() }
}

/// Whether NVRTC (libnvrtc) can be loaded. Always `false` under Miri.
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: probing for the library only loads it (no NVRTC call); it has no preconditions.
    !cfg!(miri) && unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Initialises the driver (`cuInit`). The library must be present ([`library_present`]).
pub(crate) fn init() -> Result<()> {
    Ok(result::init()?)
}

/// The calling thread's current context (null for none).
pub(crate) fn current_context() -> Result<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: `cuCtxGetCurrent` writes one handle to the valid pointer it is given.
    check(unsafe { sys::cuCtxGetCurrent(&mut ctx) })?;
    Ok(ctx)
}

/// Makes `ctx` the calling thread's current context (null unbinds).
///
/// # Safety
/// `ctx` must be null or a live context.
pub(crate) unsafe fn set_current_context(ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::cuCtxSetCurrent(ctx) })
}

/// The device ordinal of the calling thread's current context.
pub(crate) fn current_device() -> Result<c_int> {
    let mut device: sys::CUdevice = 0;
    // SAFETY: `cuCtxGetDevice` writes one device ordinal to the valid pointer it is given.
    check(unsafe { sys::cuCtxGetDevice(&mut device) })?;
    Ok(device)
}

/// The context that `stream` belongs to.
///
/// # Safety
/// `stream` must be a live stream handle (the driver dereferences it).
pub(crate) unsafe fn stream_context(stream: CUstream) -> Result<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: the caller's contract; the call writes one context handle to the valid pointer
    // it is given.
    check(unsafe { sys::cuStreamGetCtx(stream, &mut ctx) })?;
    Ok(ctx)
}

/// A new non-blocking stream of the current context, which the caller destroys with
/// [`destroy_stream`]. Made directly rather than with `CudaContext::new_stream`, which
/// synchronises the context when it makes the context's first stream.
pub(crate) fn create_stream() -> Result<CUstream> {
    Ok(result::stream::create(
        result::stream::StreamKind::NonBlocking,
    )?)
}

/// Destroys a stream made by [`create_stream`]; the driver releases it once its queued work
/// completes.
///
/// # Safety
/// `stream` must come from [`create_stream`], be destroyed once, and not be used afterwards.
/// Its context must be current.
pub(crate) unsafe fn destroy_stream(stream: CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    Ok(unsafe { result::stream::destroy(stream) }?)
}

/// Whether `stream` is capturing a graph (`cuStreamGetCaptureInfo`'s status).
///
/// # Safety
/// `stream` must be a live stream, or one of the special handles (null, `CU_STREAM_LEGACY`,
/// `CU_STREAM_PER_THREAD`) with its context current.
pub(crate) unsafe fn capture_status(stream: CUstream) -> Result<CUstreamCaptureStatus> {
    // SAFETY: the caller's contract; the call writes one status.
    Ok(unsafe { result::stream::is_capturing(stream) }?)
}

/// `Ok(true)` when `stream` has completed all its work, `Ok(false)` when some is still queued
/// (`cuStreamQuery`).
///
/// # Safety
/// As [`capture_status`]. The stream must not be capturing (the query would invalidate the
/// capture) unless the thread is in the relaxed capture mode.
pub(crate) unsafe fn stream_idle(stream: CUstream) -> Result<bool> {
    // SAFETY: the caller's contract.
    match unsafe { sys::cuStreamQuery(stream) } {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        e => Err(DriverError(e).into()),
    }
}

/// Makes `stream` wait for the work recorded in `event`.
///
/// # Safety
/// `stream` and `event` must be live, in the current context.
pub(crate) unsafe fn stream_wait_event(stream: CUstream, event: CUevent) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        result::stream::wait_event(
            stream,
            event,
            sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }?;
    Ok(())
}

/// The driver's id of `stream` (`cuStreamGetId`): unique for the life of the process, also
/// for the special handles (the legacy and per-thread default streams of the current context),
/// where a handle's value may be reused by a later stream. An error where the driver lacks the
/// call (older than CUDA 12.0, asked once) or the stream is capturing a graph (where the
/// refusal also ends the capture: callers do not ask then).
///
/// # Safety
/// `stream` must be live, in the current context.
pub(crate) unsafe fn stream_id(stream: CUstream) -> Result<u64> {
    // A property of the loaded driver library, the same for the whole process.
    static HAS_STREAM_ID: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let has = *HAS_STREAM_ID.get_or_init(|| {
        let mut version: c_int = 0;
        // SAFETY: `cuDriverGetVersion` writes one integer and needs no initialisation.
        let r = unsafe { sys::cuDriverGetVersion(&mut version) };
        r == sys::CUresult::CUDA_SUCCESS && version >= 12000
    });
    if !has {
        return Err(DriverError(sys::CUresult::CUDA_ERROR_NOT_SUPPORTED).into());
    }
    let mut id: std::ffi::c_ulonglong = 0;
    // SAFETY: the caller's contract; `id` is a valid out-pointer.
    check(unsafe { sys::cuStreamGetId(stream, &mut id) })?;
    Ok(id)
}

/// Records `event` on `stream`.
///
/// # Safety
/// As [`stream_wait_event`].
pub(crate) unsafe fn record_event(event: CUevent, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    Ok(unsafe { result::event::record(event, stream) }?)
}

/// Blocks the calling thread until the work recorded in `event` has completed.
///
/// # Safety
/// `event` must be live, in the current context.
pub(crate) unsafe fn synchronize_event(event: CUevent) -> Result<()> {
    // SAFETY: the caller's contract.
    Ok(unsafe { result::event::synchronize(event) }?)
}

/// Sets the calling thread's stream capture mode to `mode` and returns the one it replaces
/// (`cuThreadExchangeStreamCaptureMode`). The driver must be initialised.
pub(crate) fn exchange_capture_mode(mode: CUstreamCaptureMode) -> Result<CUstreamCaptureMode> {
    let mut mode = mode;
    // SAFETY: the driver reads the new mode from, and writes the previous one to, the pointer
    // it is given, which is valid for the call.
    check(unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) })?;
    Ok(mode)
}

/// The flags of devspan's page-locked allocations: portable (usable from every context), not
/// write-combined (the host reads the staging chunks of downloads).
pub(crate) const HOST_ALLOC_FLAGS: u32 = sys::CU_MEMHOSTALLOC_PORTABLE;

/// `bytes` (nonzero) of page-locked host memory ([`HOST_ALLOC_FLAGS`]), freed with
/// [`free_host`]. A context must be current. Fault site [`Fault::PinnedAlloc`].
pub(crate) fn malloc_host(bytes: usize) -> Result<*mut c_void> {
    fault::check(Call::pinned_alloc(bytes))?;
    // SAFETY: a plain allocation call; the memory is initialised by the callers.
    Ok(unsafe { result::malloc_host(bytes, HOST_ALLOC_FLAGS) }?)
}

/// A cudarc page-locked slice of `n` (nonzero) elements ([`HOST_ALLOC_FLAGS`]). Fault site
/// [`Fault::PinnedAlloc`].
///
/// # Safety
/// The memory is uninitialised: every element must be written before it is read.
pub(crate) unsafe fn alloc_pinned_slice<T: DeviceRepr>(
    ctx: &Arc<CudaContext>,
    n: usize,
) -> Result<PinnedHostSlice<T>> {
    fault::check(Call::pinned_alloc(bytes_of::<T>(n)))?;
    // SAFETY: the caller's contract.
    Ok(unsafe { ctx.alloc_pinned_with_flags::<T>(n, HOST_ALLOC_FLAGS) }?)
}

/// Frees page-locked memory from [`malloc_host`].
///
/// # Safety
/// `ptr` must come from [`malloc_host`], be freed once, and no copy may use it any longer.
pub(crate) unsafe fn free_host(ptr: *mut c_void) -> Result<()> {
    // SAFETY: the caller's contract.
    Ok(unsafe { result::free_host(ptr) }?)
}

/// Whether the driver knows `ptr` as page-locked host memory (`CU_MEMORYTYPE_HOST`). An address
/// the driver does not know (ordinary pageable memory) is `Ok(false)`. A context must be
/// current.
pub(crate) fn is_host_page_locked(ptr: *const u8) -> Result<bool> {
    let mut attr = [sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE];
    let mut memory_type = 0u32;
    let mut data = [(&mut memory_type as *mut u32).cast::<c_void>()];
    // SAFETY: a query with one attribute whose value (a `CUmemorytype`, 32 bits) goes to
    // `memory_type`. Unlike `cuMemHostGetFlags`, this call succeeds for addresses unknown to the
    // driver, leaving the value 0; it never dereferences `ptr`.
    check(unsafe {
        sys::cuPointerGetAttributes(1, attr.as_mut_ptr(), data.as_mut_ptr(), ptr as u64)
    })?;
    Ok(memory_type == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32)
}

/// An uninitialised device allocation of `n` elements, stream-ordered on `stream`. Fault site
/// [`Fault::DeviceAlloc`].
///
/// # Safety
/// Every element must be written before it is read.
pub(crate) unsafe fn alloc<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    n: usize,
) -> Result<CudaSlice<T>> {
    fault::check(Call::on(Fault::DeviceAlloc, stream, 0, bytes_of::<T>(n)))?;
    // SAFETY: the caller's contract.
    Ok(unsafe { stream.alloc::<T>(n) }?)
}

/// A zero-filled device allocation of `n` elements, stream-ordered on `stream`. Fault site
/// [`Fault::DeviceAlloc`].
pub(crate) fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    n: usize,
) -> Result<CudaSlice<T>> {
    fault::check(Call::on(Fault::DeviceAlloc, stream, 0, bytes_of::<T>(n)))?;
    Ok(stream.alloc_zeros::<T>(n)?)
}

/// Enqueues a copy of `len` elements from host `src` to device address `dst` on `stream`,
/// whose context is made current. Fault site [`Fault::HostDeviceCopy`].
///
/// # Safety
/// `src` must be readable for `len` elements until the copy completes (pageable memory: until
/// this returns) and `dst` writable device memory of `len` elements in `stream`'s context.
pub(crate) unsafe fn copy_htod<T>(
    stream: &CudaStream,
    dst: u64,
    src: *const T,
    len: usize,
) -> Result<()> {
    let bytes = len * size_of::<T>();
    fault::check(Call::on(Fault::HostDeviceCopy, stream, dst, bytes))?;
    stream.context().bind_to_thread()?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), bytes, stream.cu_stream()) })
}

/// Enqueues a copy of `len` elements from device address `src` to host `dst` on `stream`,
/// whose context is made current. Fault site [`Fault::HostDeviceCopy`].
///
/// # Safety
/// `dst` must be writable for `len` elements, and accessed by nothing else, until the copy
/// completes; `src` readable device memory of `len` elements in `stream`'s context.
pub(crate) unsafe fn copy_dtoh<T>(
    stream: &CudaStream,
    dst: *mut T,
    src: u64,
    len: usize,
) -> Result<()> {
    let bytes = len * size_of::<T>();
    fault::check(Call::on(Fault::HostDeviceCopy, stream, src, bytes))?;
    stream.context().bind_to_thread()?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, stream.cu_stream()) })
}

/// Enqueues a copy of `bytes` bytes between device addresses of the current context on
/// `stream`.
///
/// # Safety
/// Both ranges must lie in live allocations reachable from the current context, must not
/// overlap, and `stream` must be live in the current context.
pub(crate) unsafe fn copy_dtod(dst: u64, src: u64, bytes: usize, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    Ok(unsafe { result::memcpy_dtod_async(dst, src, bytes, stream) }?)
}

/// Enqueues a fill of `height` rows of `width` elements of `size` bytes (1, 2 or 4) with the
/// low `size` bytes of `bits`, row `r` at `dst + r * pitch`, on `stream`.
///
/// The driver returns an error for a `dst` or `pitch` that is not a multiple of `size`.
///
/// # Safety
/// Every row must lie in a live allocation of the current context, and `stream` must be live
/// in it.
pub(crate) unsafe fn memset_2d(
    dst: u64,
    pitch: usize,
    bits: u64,
    width: usize,
    height: usize,
    size: usize,
    stream: CUstream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let r = unsafe {
        match size {
            1 => sys::cuMemsetD2D8Async(dst, pitch, bits as u8, width, height, stream),
            2 => sys::cuMemsetD2D16Async(dst, pitch, bits as u16, width, height, stream),
            4 => sys::cuMemsetD2D32Async(dst, pitch, bits as u32, width, height, stream),
            _ => {
                return Err(crate::error::Error::invalid(format!(
                    "2-D memset of {size}-byte elements"
                )));
            }
        }
    };
    check(r)
}

/// Enqueues a fill of `n` elements of `size` bytes (1, 2 or 4) at `dst` with the low `size`
/// bytes of `bits`, on `stream`.
///
/// # Safety
/// `dst..dst + n * size` must lie in a live allocation of the current context, and `stream`
/// must be live in it.
pub(crate) unsafe fn memset(
    dst: u64,
    bits: u64,
    n: usize,
    size: usize,
    stream: CUstream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let r = unsafe {
        match size {
            1 => sys::cuMemsetD8Async(dst, bits as u8, n, stream),
            2 => sys::cuMemsetD16Async(dst, bits as u16, n, stream),
            4 => sys::cuMemsetD32Async(dst, bits as u32, n, stream),
            _ => {
                return Err(crate::error::Error::invalid(format!(
                    "memset of {size}-byte elements"
                )));
            }
        }
    };
    check(r)
}

/// Enqueues a copy of `bytes` bytes from `src` in context `src_ctx` to `dst` in context
/// `dst_ctx`, on `stream` (`cuMemcpyPeerAsync`).
///
/// # Safety
/// Both ranges must lie in live allocations of their contexts, both contexts must be live, and
/// `stream` must be a live stream of `dst_ctx`, which is current.
pub(crate) unsafe fn copy_peer(
    dst: u64,
    dst_ctx: CUcontext,
    src: u64,
    src_ctx: CUcontext,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, bytes, stream) })
}

/// Whether device `device` can access the memory of device `peer` directly.
pub(crate) fn can_access_peer(device: sys::CUdevice, peer: sys::CUdevice) -> Result<bool> {
    let mut can: c_int = 0;
    // SAFETY: the call writes one int; the driver checks the device ordinals.
    check(unsafe { sys::cuDeviceCanAccessPeer(&mut can, device, peer) })?;
    Ok(can != 0)
}

/// Lets the current context access the memory of `peer` (`cuCtxEnablePeerAccess`); `Ok` also
/// where the access is enabled already. The change is process-wide and lasts for the life of
/// the two contexts.
///
/// # Safety
/// `peer` must be a live context.
pub(crate) unsafe fn enable_peer_access(peer: CUcontext) -> Result<()> {
    // SAFETY: the caller's contract.
    match unsafe { sys::cuCtxEnablePeerAccess(peer, 0) } {
        sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        r => check(r),
    }
}

/// One attribute of the device address `ptr` whose value is a `T` of the driver's.
///
/// # Safety
/// `T` must be the type the driver writes for `attribute`.
unsafe fn pointer_attribute<T: Copy>(
    attribute: sys::CUpointer_attribute,
    ptr: u64,
    mut value: T,
) -> Result<T> {
    // SAFETY: the driver writes one value of the attribute's type (the caller's contract) to
    // the valid pointer it is given; it never dereferences `ptr` itself.
    check(unsafe { sys::cuPointerGetAttribute((&mut value as *mut T).cast(), attribute, ptr) })?;
    Ok(value)
}

/// The stream-ordered memory pool `ptr` was allocated from; `None` for other memory.
pub(crate) fn pointer_pool(ptr: u64) -> Result<Option<CUmemoryPool>> {
    // SAFETY: the attribute is one pool handle.
    let pool = unsafe {
        pointer_attribute::<CUmemoryPool>(
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
            ptr,
            std::ptr::null_mut(),
        )
    }?;
    Ok((!pool.is_null()).then_some(pool))
}

/// What the current context may do with the memory at `ptr`
/// (`CU_POINTER_ATTRIBUTE_ACCESS_FLAGS`: 0 for no access).
pub(crate) fn pointer_access_flags(ptr: u64) -> Result<c_uint> {
    // SAFETY: the attribute is one unsigned int.
    unsafe {
        pointer_attribute::<c_uint>(
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
            ptr,
            0,
        )
    }
}

/// The ordinal of the device whose memory `ptr` addresses; an error for an address the driver
/// does not know as CUDA-accessible memory.
pub(crate) fn pointer_device(ptr: u64) -> Result<c_int> {
    // SAFETY: the attribute is one int.
    unsafe {
        pointer_attribute::<c_int>(
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
            -1,
        )
    }
}

/// Grants device `device` read-write access to `pool` unless it has it. The change is
/// process-wide: every allocation of the pool, by anyone, becomes accessible from `device`.
///
/// # Safety
/// `pool` must be a live memory pool.
pub(crate) unsafe fn grant_pool_access(pool: CUmemoryPool, device: c_int) -> Result<()> {
    let mut location = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: device,
    };
    let mut flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
    // SAFETY: `pool` is live (the caller's contract); the call reads `location` and writes one
    // flags value.
    let r = unsafe { sys::cuMemPoolGetAccess(&mut flags, pool, &mut location) };
    if r == sys::CUresult::CUDA_SUCCESS
        && flags == sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    {
        return Ok(());
    }
    let desc = sys::CUmemAccessDesc {
        location,
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: as above; one access descriptor, read by the call.
    check(unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) })
}
