//! Page-locked host memory: [`PinnedBuffer`], and the pool of staging chunks that transfers
//! from ordinary (pageable) memory go through.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use ndarray::Dimension;

use crate::array::DeviceArray;
use crate::element::DeviceElement;
use crate::error::{Error, ErrorKind, Result};
use crate::view::{DeviceView, DeviceViewMut};

/// A buffer of `T` in page-locked (pinned) host memory, which the GPU's copy engines read and
/// write directly, at full bus speed and asynchronously.
///
/// The buffer holds its CUDA context by `Arc`, so it can be freed whatever else was dropped
/// first. It remembers the device copies enqueued on it
/// ([`copy_to_device`](Self::copy_to_device), [`copy_from_device`](Self::copy_from_device),
/// which return as soon as the copy is enqueued): host access ([`as_slice`](Self::as_slice),
/// [`as_mut_slice`](Self::as_mut_slice)) and `Drop` wait for them first, so safe code never sees
/// memory the GPU is still writing, and the memory is never freed under a pending copy.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use devspan::{DeviceArray, PinnedBuffer};
/// let stream = devspan::default_stream(0)?;
/// let mut pinned = PinnedBuffer::<f32>::zeros(stream.context(), 6)?;
/// pinned.as_mut_slice()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
/// let mut dev = DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
/// pinned.copy_to_device(&stream, &mut dev.view_mut())?; // enqueued, returns at once
/// let mut back = PinnedBuffer::<f32>::zeros(stream.context(), 6)?;
/// back.copy_from_device(&stream, &dev.t())?; // the transpose, in row-major order
/// assert_eq!(back.as_slice()?, &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]); // waits for the copy
/// # Ok(()) }
/// ```
///
/// # Relation to cudarc's `PinnedHostSlice`
///
/// [`from_pinned_host_slice`](Self::from_pinned_host_slice) and
/// [`to_pinned_host_slice`](Self::to_pinned_host_slice) convert, by copying. devspan keeps a
/// type of its own rather than building on [`cudarc::driver::PinnedHostSlice`] (cudarc 0.19)
/// because of these differences:
///
/// - **Allocation.** [`CudaContext::alloc_pinned`] allocates write-combined memory
///   (`CU_MEMHOSTALLOC_WRITECOMBINED`), which the host reads uncached; a `PinnedBuffer` is
///   `CU_MEMHOSTALLOC_PORTABLE` and not write-combined, since the host reads the staging
///   chunks of downloads. cudarc's allocation panics (`expect`, `assert!`) on a byte size that
///   overflows and on a null pointer, which the driver returns for zero bytes, so it has no
///   empty slice; a `PinnedBuffer` reports overflow as `Err` and allocates nothing when empty.
/// - **Tracking.** A `PinnedHostSlice` has one event, which cudarc's copies wait for and
///   re-record only while the context manages stream synchronisation
///   ([`CudaContext::is_managing_stream_synchronization`]); with only the default stream in use
///   its accessors and `Drop` do not wait for a pending copy, and a copy on a stream of another
///   context cannot record the event (the error is only stored in the context). A
///   `PinnedBuffer` records an event after every copy enqueued on it, on any stream, waits
///   for earlier ones across contexts, and refuses copies on a capturing stream.
/// - **Failure.** `PinnedHostSlice`'s `Drop` frees the memory even when waiting for its event
///   failed; a `PinnedBuffer` that cannot prove that no copy uses its memory leaks it instead,
///   and refuses host access.
/// - **Copies.** cudarc copies a whole slice to or from a contiguous `CudaSlice`/`CudaView`
///   and panics when the destination is shorter than the source;
///   [`copy_to_device`](Self::copy_to_device) and
///   [`copy_from_device`](Self::copy_from_device) take device views of any layout and return
///   `Err`.
/// - **Ownership.** `PinnedHostSlice` has no constructor from raw parts and no way to give up
///   its memory, so neither type can take over the other's allocation.
pub struct PinnedBuffer<T> {
    ptr: NonNull<T>,
    len: usize,
    ctx: Arc<CudaContext>,
    /// Events recorded after each device copy enqueued on the buffer and not yet waited for.
    pending: Mutex<Vec<CudaEvent>>,
    /// Set when a copy may still use the memory with no event to wait for (the driver failed
    /// both to record one and to synchronise the stream): host access is refused from then
    /// on and the memory is leaked, never freed.
    untracked: AtomicBool,
}

// SAFETY: the buffer owns its allocation like a `Box<[T]>`; shared access goes through `&self`
// methods that only read it (after waiting for device writes), and `pending` is a `Mutex`.
unsafe impl<T: Send> Send for PinnedBuffer<T> {}
// SAFETY: see `Send`; `&PinnedBuffer` only hands out `&[T]`.
unsafe impl<T: Sync> Sync for PinnedBuffer<T> {}

impl<T> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.len)
            .field("device", &self.ctx.ordinal())
            .finish()
    }
}

impl<T: DeviceElement> PinnedBuffer<T> {
    /// A zero-filled buffer of `len` elements, page-locked through `ctx`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let ctx = devspan::context(0)?;
    /// let b = devspan::PinnedBuffer::<u16>::zeros(&ctx, 1024)?;
    /// assert_eq!(b.len(), 1024);
    /// # Ok(()) }
    /// ```
    pub fn zeros(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        let b = Self::alloc(ctx, len)?;
        // SAFETY: the allocation holds `len` elements; every `T` is a plain bit pattern for
        // which all-zero bytes are a valid value.
        unsafe { std::ptr::write_bytes(b.ptr.as_ptr(), 0, len) };
        Ok(b)
    }

    /// A buffer holding a copy of `data`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let ctx = devspan::context(0)?;
    /// let b = devspan::PinnedBuffer::from_slice(&ctx, &[1u8, 2, 3])?;
    /// assert_eq!(b.as_slice()?, &[1, 2, 3]);
    /// # Ok(()) }
    /// ```
    pub fn from_slice(ctx: &Arc<CudaContext>, data: &[T]) -> Result<Self> {
        let b = Self::alloc(ctx, data.len())?;
        // SAFETY: the new allocation holds `data.len()` elements and cannot overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b.ptr.as_ptr(), data.len()) };
        Ok(b)
    }

    /// Uninitialised allocation (every caller writes it before it is read).
    pub(crate) fn alloc(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| {
                Error::overflow(format!(
                    "a pinned buffer of {len} elements of {} bytes overflows isize",
                    std::mem::size_of::<T>()
                ))
            })?;
        let ptr = if bytes == 0 {
            NonNull::dangling()
        } else {
            ctx.bind_to_thread()?;
            let p = crate::driver::malloc_host(bytes)?;
            NonNull::new(p.cast::<T>())
                .ok_or_else(|| Error::invalid("cuMemHostAlloc returned a null pointer"))?
        };
        Ok(PinnedBuffer {
            ptr,
            len,
            ctx: ctx.clone(),
            pending: Mutex::new(Vec::new()),
            untracked: AtomicBool::new(false),
        })
    }

    /// Number of elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let b = devspan::PinnedBuffer::<f64>::zeros(&devspan::context(0)?, 3)?;
    /// assert_eq!(b.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no element.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// assert!(devspan::PinnedBuffer::<f64>::zeros(&devspan::context(0)?, 0)?.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The context the memory was page-locked through (and is freed through).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let ctx = devspan::context(0)?;
    /// let b = devspan::PinnedBuffer::<u8>::zeros(&ctx, 1)?;
    /// assert_eq!(b.context().ordinal(), 0);
    /// # Ok(()) }
    /// ```
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Waits for every device copy enqueued on the buffer.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let b = devspan::PinnedBuffer::<u8>::zeros(&devspan::context(0)?, 1)?;
    /// b.synchronize()?;
    /// # Ok(()) }
    /// ```
    pub fn synchronize(&self) -> Result<()> {
        if self.untracked.load(Ordering::Acquire) {
            return Err(Error::invalid(
                "a device copy of this pinned buffer could not be tracked after a driver error; \
                 its contents are unavailable",
            ));
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(e) = pending.last() {
            e.synchronize()?;
            pending.pop();
        }
        Ok(())
    }

    /// The elements, after waiting for pending device copies.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let b = devspan::PinnedBuffer::from_slice(&devspan::context(0)?, &[5i32; 4])?;
    /// assert_eq!(b.as_slice()?.iter().sum::<i32>(), 20);
    /// # Ok(()) }
    /// ```
    pub fn as_slice(&self) -> Result<&[T]> {
        self.synchronize()?;
        // SAFETY: `len` initialised elements at `ptr`, owned by `self`; no device copy into
        // them is pending (waited above) and a new one needs `&mut self`.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) })
    }

    /// The elements, writable, after waiting for pending device copies.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let mut b = devspan::PinnedBuffer::<u8>::zeros(&devspan::context(0)?, 4)?;
    /// b.as_mut_slice()?[2] = 9;
    /// assert_eq!(b.as_slice()?, &[0, 0, 9, 0]);
    /// # Ok(()) }
    /// ```
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.synchronize()?;
        // SAFETY: as in `as_slice`, and `&mut self` excludes every other access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) })
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// Makes `stream` wait for pending copies and records a new pending event after `enqueue`.
    ///
    /// The lock on `pending` is held throughout, so copies enqueued from several threads each
    /// wait for the others' events and none is dropped untracked. Whatever `enqueue` issued
    /// before failing is tracked too: its event is recorded, or the stream is waited for, or
    /// (when both fail) the buffer is marked untracked, after which host access is refused
    /// and `Drop` leaks the memory rather than free it under a copy.
    fn enqueue_on(
        &self,
        stream: &Arc<CudaStream>,
        enqueue: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        crate::capture::refuse(
            stream,
            "a copy between a pinned buffer and device memory",
            "the buffer's host access waits for its device copies, and graph replays are not \
             among them",
        )?;
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for e in pending.iter() {
            if e.context() == stream.context() {
                stream.wait(e)?;
            } else {
                e.synchronize()?;
            }
        }
        let e = stream.context().new_event(None)?;
        let r = enqueue();
        match e.record(stream) {
            Ok(()) => {
                // `e` completes after every earlier event: `stream` waited for those of its
                // context, and the others were waited for on the host.
                pending.clear();
                pending.push(e);
            }
            Err(err) => {
                if stream.synchronize().is_err() {
                    self.untracked.store(true, Ordering::Release);
                }
                r?;
                return Err(err.into());
            }
        }
        r
    }

    /// Enqueues on `stream` a copy of `len` elements from device address `src` into the start
    /// of the buffer, and returns without waiting. The copy is tracked as those of
    /// [`copy_from_device`](Self::copy_from_device) are: host access and `Drop` wait for it.
    /// `Err` with nothing enqueued when `len` exceeds the buffer.
    ///
    /// # Safety
    /// `src` must be `len` readable device elements in `stream`'s context whose producers are
    /// ordered before this call on `stream`, and must stay allocated until the copy completes
    /// (a stream-ordered free enqueued on `stream` after this call is fine).
    pub(crate) unsafe fn enqueue_from_device_ptr(
        &mut self,
        stream: &Arc<CudaStream>,
        src: u64,
        len: usize,
    ) -> Result<()> {
        if len > self.len {
            return Err(Error::invalid(format!(
                "a copy of {len} elements into a pinned buffer of {}",
                self.len
            )));
        }
        let dst = self.ptr.as_ptr();
        self.enqueue_on(stream, || {
            // SAFETY: `len <= self.len` writable pinned elements owned by the buffer, which
            // `&mut self` keeps from every other access until the copy's event completes (host
            // access and Drop wait for it); the source is the caller's contract.
            unsafe { crate::driver::copy_dtoh(stream, dst, src, len) }
        })
    }

    fn check_len(&self, n: usize, shape: &[usize]) -> Result<()> {
        if n != self.len {
            return Err(Error::shape(format!(
                "a pinned buffer of {} elements cannot hold a device view of shape {shape:?} ({n} elements)",
                self.len
            )));
        }
        Ok(())
    }

    /// Enqueues, on `stream`, a copy of the buffer (the elements of `dst` in row-major order)
    /// into the device view `dst` of any layout, and returns without waiting. `Err` with
    /// nothing written when the lengths differ or the stream belongs to another device.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let src = devspan::PinnedBuffer::from_slice(stream.context(), &[1i64, 2, 3])?;
    /// let mut dev = devspan::DeviceArray::<i64, _>::zeros(&stream, 6)?;
    /// src.copy_to_device(&stream, &mut dev.slice_mut(s![..;-2]))?;
    /// assert_eq!(dev.to_host_on(&stream)?, ndarray::arr1(&[0, 3, 0, 2, 0, 1]));
    /// # Ok(()) }
    /// ```
    pub fn copy_to_device<D: Dimension>(
        &self,
        stream: &Arc<CudaStream>,
        dst: &mut DeviceViewMut<'_, T, D>,
    ) -> Result<()> {
        self.check_len(dst.len(), dst.shape())?;
        crate::device::check_stream(stream, dst.device(), "the destination view")?;
        if self.len == 0 {
            return Ok(());
        }
        self.enqueue_on(stream, || {
            let src = self.ptr.as_ptr().cast_const();
            if dst.is_standard_layout() {
                let d = dst.device_ptr();
                dst.raw().keep.writing(stream, || {
                    // SAFETY: `len` readable pinned elements, kept alive (Drop waits for the
                    // event recorded after this copy) and not written by the host before it
                    // completes (host writes need `&mut self`, which waits); the destination
                    // is `len` contiguous elements of the view's validated span.
                    unsafe { crate::driver::copy_htod(stream, d, src, self.len) }
                })
            } else {
                // SAFETY: every element is written by the DMA below before the kernel reads it.
                let mut tmp = unsafe { DeviceArray::<T, D>::uninit(stream, dst.dim())? };
                {
                    let tv = tmp.view_mut();
                    let d = tv.device_ptr();
                    tv.raw().keep.writing(stream, || {
                        // SAFETY: as above; `tmp` holds `len` contiguous elements.
                        unsafe { crate::driver::copy_htod(stream, d, src, self.len) }
                    })?;
                }
                dst.assign_on(stream, &tmp)
            }
        })
    }

    /// Enqueues, on `stream`, a copy of the device view `src` of any layout into the buffer
    /// (in row-major order), and returns without waiting; [`as_slice`](Self::as_slice) waits.
    /// `Err` with nothing written when the lengths differ or the stream belongs to another
    /// device.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let dev = devspan::DeviceArray::from_host(&stream, &ndarray::array![[1u8, 2], [3, 4]].view())?;
    /// let mut b = devspan::PinnedBuffer::<u8>::zeros(stream.context(), 4)?;
    /// b.copy_from_device(&stream, &dev.t())?;
    /// assert_eq!(b.as_slice()?, &[1, 3, 2, 4]);
    /// # Ok(()) }
    /// ```
    pub fn copy_from_device<D: Dimension>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceView<'_, T, D>,
    ) -> Result<()> {
        self.check_len(src.len(), src.shape())?;
        crate::device::check_stream(stream, src.device(), "the source view")?;
        if self.len == 0 {
            return Ok(());
        }
        let dst = self.ptr.as_ptr();
        let len = self.len;
        let from = |view: &DeviceView<'_, T, D>| {
            let s = view.device_ptr();
            view.raw().keep.reading(stream, || {
                // SAFETY: `len` writable pinned elements owned by the buffer, which `&mut self`
                // keeps from every other access until the copy's event completes (host access
                // and Drop wait for it); the source is `len` contiguous elements of a
                // validated span.
                unsafe { crate::driver::copy_dtoh(stream, dst, s, len) }
            })
        };
        self.enqueue_on(stream, || {
            if src.is_standard_layout() {
                from(src)
            } else {
                // The temporary is freed stream-ordered, after the copy.
                from(&src.to_contiguous_on(stream)?.view())
            }
        })
    }
}

impl<T> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        let pending = std::mem::take(self.pending.get_mut().unwrap_or_else(|p| p.into_inner()));
        let mut ok = true;
        for e in &pending {
            ok &= e.synchronize().is_ok();
        }
        if self.len == 0 || std::mem::size_of::<T>() == 0 {
            return;
        }
        if !ok || *self.untracked.get_mut() {
            // A copy may still use the memory: leaking it is the only safe choice.
            return;
        }
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: `ptr` came from `driver::malloc_host` and no copy uses it any longer.
        let freed = unsafe { crate::driver::free_host(self.ptr.as_ptr().cast()) };
        if let Err(e) = freed
            && let ErrorKind::Driver(d) = e.kind()
        {
            self.ctx.record_err(Err::<(), _>(*d));
        }
    }
}

/// Chunks kept in the staging pool at most.
const POOL_MAX: usize = 64;

static POOL: Mutex<Vec<PinnedBuffer<u8>>> = Mutex::new(Vec::new());

/// `count` pinned staging chunks of at least `bytes` bytes each, from the pool or new.
pub(crate) fn take_chunks(
    ctx: &Arc<CudaContext>,
    count: usize,
    bytes: usize,
) -> Result<Vec<PinnedBuffer<u8>>> {
    let mut out = Vec::with_capacity(count);
    {
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        let mut i = 0;
        while i < pool.len() && out.len() < count {
            if pool[i].len >= bytes {
                out.push(pool.swap_remove(i));
            } else {
                i += 1;
            }
        }
    }
    while out.len() < count {
        out.push(PinnedBuffer::<u8>::alloc(ctx, bytes)?);
    }
    Ok(out)
}

/// Returns chunks no copy uses any longer to the pool.
pub(crate) fn give_back_chunks(chunks: Vec<PinnedBuffer<u8>>) {
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    for c in chunks {
        if pool.len() < POOL_MAX {
            pool.push(c);
        }
    }
}

/// Empties the staging pool (its chunks are idle, so they are freed).
#[cfg(test)]
pub(crate) fn drain_pool() {
    let drained = std::mem::take(&mut *POOL.lock().unwrap_or_else(|p| p.into_inner()));
    drop(drained);
}

/// Chunks of at least `bytes` bytes in the staging pool.
#[cfg(test)]
pub(crate) fn pooled(bytes: usize) -> usize {
    let pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    pool.iter().filter(|c| c.len >= bytes).count()
}

/// Whether the `bytes` bytes at `ptr` are page-locked memory known to the driver (allocated by
/// `cuMemHostAlloc` or registered). Both ends are checked; a wrong answer costs speed only.
pub(crate) fn is_page_locked(ctx: &Arc<CudaContext>, ptr: *const u8, bytes: usize) -> bool {
    if bytes == 0 || ctx.bind_to_thread().is_err() {
        return false;
    }
    let probe = |p: *const u8| crate::driver::is_host_page_locked(p).unwrap_or(false);
    probe(ptr) && probe(ptr.wrapping_add(bytes - 1))
}
