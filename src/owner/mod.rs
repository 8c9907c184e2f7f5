//! Keep-alives: what a view holds so that the memory it points at outlives the work on it.
//!
//! A view keeps its memory alive in one of three ways:
//! - a Rust borrow (the lifetime `'a` of `DeviceView<'a, ..>`) over a `CudaSlice`, `CudaView`,
//!   [`DeviceArray`](crate::DeviceArray) or another view. For cudarc memory every devspan
//!   operation also takes part in cudarc's per-allocation events: the stream waits for earlier
//!   conflicting work, and the operation is recorded in the allocation's read or write event,
//!   which cudarc's `CudaSlice` waits for before it frees the memory, stream-ordered;
//! - a shared owner handle, [`Arc<dyn DeviceOwner>`](DeviceOwner), for memory whose owner Rust
//!   cannot see (an FFI allocation, a DLPack producer, another library's allocator). Such views
//!   are `'static`. Every devspan operation on them records an event on its stream; the owner is
//!   dropped exactly once, after the last view derived from it **and** after that work;
//! - a plain borrow with no tracking (`from_raw_parts_borrowed`), whose caller promises the
//!   memory outlives every use (an `unsafe` contract).
//!
//! No lock is held while the operation itself runs: a keep-alive is locked briefly before the
//! work is enqueued (to order the stream after earlier work) and briefly after (to record it),
//! one keep-alive at a time, so user code run in between (the closures of
//! [`with_kernel_view`](crate::DeviceView::with_kernel_view)) may use any view of the same
//! memory.
//!
//! On a stream that is capturing a graph, tracked memory is neither waited for nor recorded:
//! [`crate::capture`] checks instead that the earlier accesses have completed.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop,
};

use crate::capture::CaptureCheck;
use crate::error::{Error, Result};

pub(crate) mod fence;
mod shared;
pub use shared::SharedOwner;

use fence::Fence;

/// Something that owns device memory and releases it when dropped.
///
/// Implement it for whatever must stay alive while views of its memory exist: a handle from
/// another library, a DLPack managed tensor, a struct holding a `CudaSlice` and its stream.
/// devspan never calls anything on it but [`describe`](Self::describe) and
/// [`release_stream`](Self::release_stream); it keeps it alive and drops it once, on whichever
/// thread drops the last view that refers to it.
///
/// **Stream-ordered release.** The owner is dropped only once every operation devspan enqueued
/// on its memory has completed, or is ordered before the release:
/// - when [`release_stream`](Self::release_stream) is `None` (the default), devspan waits on the
///   host, in the drop of the last view, for the work it enqueued on the memory (on any stream)
///   to complete, then drops the owner. Nothing waits when that work has completed already;
/// - when it names a stream, the owner promises that dropping it releases the memory
///   stream-ordered on that stream (as `cuMemFreeAsync` does): devspan makes that stream wait
///   for its work on the memory and drops the owner without blocking.
///
/// Work the owner's user enqueued outside devspan is theirs to order, as with any CUDA memory.
///
/// Each `from_raw_parts` call starts one log of that work, shared by every view derived from
/// the result (clones, slices, splits, reshapes). Derive views rather than calling
/// `from_raw_parts` again for each operation: dropping the last view of a log releases its
/// handle on the owner as above, waiting on the host when the owner names no release stream.
///
/// **A drop that panics.** The panic propagates from the drop of the last view, on that
/// thread, as a panic in any value's drop does (the owner's fields are still dropped while it
/// unwinds). devspan holds none of its locks while it drops an owner, so its caches, its
/// staging pool and other views are unaffected.
///
/// ```
/// use std::sync::Arc;
/// use devspan::DeviceOwner;
///
/// struct ForeignBuffer { /* handle of another allocator */ }
/// impl DeviceOwner for ForeignBuffer {}
/// impl Drop for ForeignBuffer {
///     fn drop(&mut self) { /* release the memory here */ }
/// }
/// let owner: Arc<dyn DeviceOwner> = Arc::new(ForeignBuffer {});
/// # drop(owner);
/// ```
pub trait DeviceOwner: Send + Sync + 'static {
    /// A short description used in `Debug` output of views.
    ///
    /// ```
    /// use devspan::DeviceOwner;
    /// struct Pool;
    /// impl DeviceOwner for Pool {
    ///     fn describe(&self) -> String { "pool block".into() }
    /// }
    /// assert_eq!(Pool.describe(), "pool block");
    /// ```
    fn describe(&self) -> String {
        String::from("foreign owner")
    }

    /// The stream on which dropping this owner releases its memory, stream-ordered, if it does
    /// (see the trait's documentation). The default, `None`, makes devspan wait on the host for
    /// its own pending work before it drops the owner.
    ///
    /// Constructors that take an owner (`from_raw_parts`) are `unsafe`: naming a stream here is
    /// part of their contract, and a wrong answer can let memory be reused under queued work.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use std::sync::Arc;
    /// use cudarc::driver::{CudaSlice, CudaStream};
    /// use devspan::DeviceOwner;
    ///
    /// /// Memory from cudarc's stream-ordered allocator: freed with `cuMemFreeAsync`.
    /// struct Block(CudaSlice<f32>);
    /// impl DeviceOwner for Block {
    ///     fn release_stream(&self) -> Option<Arc<CudaStream>> {
    ///         self.0.context().has_async_alloc().then(|| self.0.stream().clone())
    ///     }
    /// }
    /// let stream = devspan::new_stream(0)?;
    /// let b = Block(stream.alloc_zeros::<f32>(16)?);
    /// assert!(b.release_stream().is_some() || !stream.context().has_async_alloc());
    /// # Ok(()) }
    /// ```
    fn release_stream(&self) -> Option<Arc<CudaStream>> {
        None
    }
}

impl<T: Send + Sync + 'static> DeviceOwner for CudaSlice<T> {
    fn describe(&self) -> String {
        format!("CudaSlice({} elements)", self.len())
    }

    /// The slice's own stream, when its context frees with `cuMemFreeAsync` on it.
    fn release_stream(&self) -> Option<Arc<CudaStream>> {
        self.context()
            .has_async_alloc()
            .then(|| self.stream().clone())
    }
}

impl<T: DeviceOwner + ?Sized> DeviceOwner for Box<T> {
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn release_stream(&self) -> Option<Arc<CudaStream>> {
        (**self).release_stream()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A raw event of a cudarc allocation, valid for as long as the borrow of that allocation.
#[derive(Clone, Copy)]
pub(crate) struct RawEvent(crate::driver::CUevent);

// SAFETY: a `CUevent` is a handle that the driver lets any thread use.
unsafe impl Send for RawEvent {}

/// The event cudarc would record when `guard` drops, taken out so that nothing is recorded
/// now; `None` when cudarc tracks nothing for this memory.
fn take_event(guard: &mut SyncOnDrop<'_>) -> Option<RawEvent> {
    match guard {
        SyncOnDrop::Record(target) => target.take().map(|(e, _)| RawEvent(e.cu_event())),
        SyncOnDrop::Sync(target) => {
            // Not produced by `device_ptr(_mut)` of slices and views; synchronising keeps
            // cudarc's meaning of it.
            target.take().map(|s| s.synchronize());
            None
        }
    }
}

/// Access to cudarc's event tracking of one allocation, behind type erasure.
pub(crate) trait CudaTrack: Send {
    /// Makes `stream` wait for earlier writes (and, for a write, earlier reads) of the memory
    /// and returns the memory's device address and the event that records this access once it
    /// is enqueued; `Err` for a write to a read-only borrow.
    fn prepare(&mut self, stream: &CudaStream, write: bool) -> Result<(u64, Option<RawEvent>)>;
    /// The memory's device address, taken without enqueuing an access
    /// ([`crate::capture::address_of`]).
    fn address(&self) -> u64;
    /// The stream the memory was allocated on (cudarc's `DeviceSlice::stream`).
    fn stream(&self) -> Arc<CudaStream>;
    /// Whether cudarc waits on the memory's events in [`prepare`](Self::prepare) (its context
    /// manages stream synchronisation).
    fn waits(&self) -> bool;
}

fn read_only() -> Error {
    Error::invalid("a read-only cudarc borrow was asked for write access")
}

/// A borrow of a cudarc slice, `&'a CudaSlice<T>` when `WRITE` is false and
/// `&'a mut CudaSlice<T>` when it is true, kept as a pointer so that the tracker holding it is
/// `'static` (see [`KeepAlive::Cuda`]).
pub(crate) struct SliceBorrow<T, const WRITE: bool>(NonNull<CudaSlice<T>>);

// SAFETY: it stands for `&CudaSlice<T>` (`Send` as `CudaSlice` is `Sync`) or `&mut CudaSlice<T>`
// (`Send` as `CudaSlice` is `Send`); the pointer is dereferenced only while the borrow it comes
// from is live.
unsafe impl<T, const WRITE: bool> Send for SliceBorrow<T, WRITE> {}

impl<T: Send + Sync, const WRITE: bool> CudaTrack for SliceBorrow<T, WRITE> {
    fn prepare(&mut self, stream: &CudaStream, write: bool) -> Result<(u64, Option<RawEvent>)> {
        let (ptr, mut guard) = match (write, WRITE) {
            (true, false) => return Err(read_only()),
            // SAFETY: the borrow is live while its keep-alive is used ([`KeepAlive::Cuda`]),
            // and the tracker's lock makes this the only access through it.
            (true, true) => unsafe { self.0.as_mut() }.device_ptr_mut(stream),
            // SAFETY: as above; a shared access.
            (false, _) => unsafe { self.0.as_ref() }.device_ptr(stream),
        };
        Ok((ptr, take_event(&mut guard)))
    }
    fn address(&self) -> u64 {
        // SAFETY: as in `prepare`; a shared access under the tracker's lock.
        crate::capture::address_of(unsafe { self.0.as_ref() })
    }
    fn stream(&self) -> Arc<CudaStream> {
        // SAFETY: as in `prepare`; a shared access under the tracker's lock.
        unsafe { self.0.as_ref() }.stream().clone()
    }
    fn waits(&self) -> bool {
        // SAFETY: as in `prepare`; a shared access under the tracker's lock.
        let slice = unsafe { self.0.as_ref() };
        slice.context().is_managing_stream_synchronization()
    }
}

impl<T: Send + Sync> CudaTrack for CudaView<'static, T> {
    fn prepare(&mut self, stream: &CudaStream, write: bool) -> Result<(u64, Option<RawEvent>)> {
        if write {
            return Err(read_only());
        }
        let (ptr, mut guard) = self.device_ptr(stream);
        Ok((ptr, take_event(&mut guard)))
    }
    fn address(&self) -> u64 {
        crate::capture::address_of(self)
    }
    fn stream(&self) -> Arc<CudaStream> {
        DeviceSlice::stream(self).clone()
    }
    fn waits(&self) -> bool {
        DeviceSlice::stream(self)
            .context()
            .is_managing_stream_synchronization()
    }
}

impl<T: Send + Sync> CudaTrack for CudaViewMut<'static, T> {
    fn prepare(&mut self, stream: &CudaStream, write: bool) -> Result<(u64, Option<RawEvent>)> {
        let (ptr, mut guard) = if write {
            self.device_ptr_mut(stream)
        } else {
            self.device_ptr(stream)
        };
        Ok((ptr, take_event(&mut guard)))
    }
    fn address(&self) -> u64 {
        crate::capture::address_of(self)
    }
    fn stream(&self) -> Arc<CudaStream> {
        DeviceSlice::stream(self).clone()
    }
    fn waits(&self) -> bool {
        DeviceSlice::stream(self)
            .context()
            .is_managing_stream_synchronization()
    }
}

/// The shared form of a [`CudaTrack`] that views hold (clones, slices and split halves of one
/// borrow share it).
pub(crate) struct Tracked<X> {
    track: Mutex<X>,
    /// The memory's device address, once `known`: learnt from the first access
    /// ([`SharedTrack::prepare`], whose cudarc call hands it out anyway) or asked for before one
    /// ([`SharedTrack::address`]), so that making views of cudarc memory enqueues nothing.
    address: AtomicU64,
    known: AtomicBool,
}

impl<X> Tracked<X> {
    fn learn(&self, address: u64) {
        if !self.known.load(Ordering::Acquire) {
            self.address.store(address, Ordering::Relaxed);
            self.known.store(true, Ordering::Release);
        }
    }
}

/// Type-erased [`Tracked`].
pub(crate) trait SharedTrack: Send + Sync {
    /// Orders `stream` after the earlier accesses this one conflicts with and returns the event
    /// to record it in; inside a capture (`cap`), checks them instead (see [`crate::capture`])
    /// and returns `None`: nothing is recorded.
    fn prepare(
        &self,
        stream: &CudaStream,
        write: bool,
        cap: &mut CaptureCheck<'_>,
    ) -> Result<Option<RawEvent>>;
    fn finish(&self, stream: &Arc<CudaStream>, event: RawEvent) -> Result<()>;
    fn stream(&self) -> Arc<CudaStream>;
    /// The memory's device address. Not called while this thread holds the tracker's lock.
    fn address(&self) -> u64;
}

/// Which stream devspan last recorded a cudarc event on.
struct LastRecord {
    event: usize,
    stream: Weak<CudaStream>,
}

/// Slots of [`RECORDS`].
const RECORD_SLOTS: usize = 256;

/// The stream devspan last recorded each recently used cudarc event on, in slots chosen by the
/// event's handle (a slot keeps the latest event that maps to it). Each slot's lock also makes
/// "wait, record, note" one step for the events that map to it.
static RECORDS: [Mutex<Option<LastRecord>>; RECORD_SLOTS] =
    [const { Mutex::new(None) }; RECORD_SLOTS];

impl<X: CudaTrack> SharedTrack for Tracked<X> {
    fn prepare(
        &self,
        stream: &CudaStream,
        write: bool,
        cap: &mut CaptureCheck<'_>,
    ) -> Result<Option<RawEvent>> {
        let mut track = lock(&self.track);
        let tracked = track.waits() || stream.context().is_managing_stream_synchronization();
        if tracked && cap.capturing()? {
            // cudarc's waits go to a probe stream; the access is not recorded.
            crate::capture::follow_in_capture(stream, write, |probe| {
                let (address, _) = track.prepare(probe, write)?;
                self.learn(address);
                Ok(())
            })?;
            return Ok(None);
        }
        let (address, event) = track.prepare(stream, write)?;
        self.learn(address);
        Ok(event)
    }

    fn address(&self) -> u64 {
        if self.known.load(Ordering::Acquire) {
            return self.address.load(Ordering::Relaxed);
        }
        let address = lock(&self.track).address();
        self.learn(address);
        address
    }

    fn stream(&self) -> Arc<CudaStream> {
        lock(&self.track).stream()
    }

    /// Records the access in `event` on `stream`. Unless devspan's latest record of the event
    /// was on this same stream (stream order then covers it), the stream first waits for what
    /// the event recorded so far: the event then covers every access devspan recorded in it,
    /// whichever streams and threads made them, and cudarc's free waits for it.
    fn finish(&self, stream: &Arc<CudaStream>, event: RawEvent) -> Result<()> {
        let ctx = stream.context();
        if !ctx.is_managing_stream_synchronization() {
            return Ok(());
        }
        let key = event.0 as usize;
        let mut last = lock(&RECORDS[(key >> 4) % RECORD_SLOTS]);
        let same_stream = last.as_ref().is_some_and(|r| {
            r.event == key
                && r.stream
                    .upgrade()
                    .is_some_and(|s| s.cu_stream() == stream.cu_stream() && s.context() == ctx)
        });
        ctx.bind_to_thread()?;
        // SAFETY: `event` belongs to the cudarc allocation that this tracker borrows (alive
        // while the tracker is used), in `stream`'s context, bound above.
        unsafe {
            if !same_stream {
                crate::driver::stream_wait_event(stream.cu_stream(), event.0)?;
            }
            crate::driver::record_event(event.0, stream.cu_stream())?;
        }
        *last = Some(LastRecord {
            event: key,
            stream: Arc::downgrade(stream),
        });
        Ok(())
    }
}

/// What keeps a view's memory alive: a borrow, a tracked cudarc borrow or a shared owner.
#[derive(Clone)]
pub(crate) enum KeepAlive<'a> {
    /// A plain borrow of lifetime `'a`; nothing to track.
    Borrow(PhantomData<&'a ()>),
    /// A borrow of cudarc memory (of lifetime `'a`) whose events devspan's operations record.
    ///
    /// The tracker is `'static`: it holds the borrow as a pointer or with its lifetime
    /// extended, and uses it only through this keep-alive, which cannot be used after `'a`.
    /// Dropping it touches nothing borrowed, so `KeepAlive<'a>` has no drop glue that needs `'a`
    /// and a view's borrow ends at its last use, as ndarray's views' borrows do.
    Cuda(Arc<dyn SharedTrack>, PhantomData<&'a ()>),
    /// A shared owner handle with its stream log.
    Owner(Arc<SharedOwner>),
}

impl fmt::Debug for KeepAlive<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepAlive::Borrow(_) => f.write_str("borrow"),
            KeepAlive::Cuda(..) => f.write_str("cudarc borrow"),
            KeepAlive::Owner(o) => write!(f, "owner: {}", o.owner.describe()),
        }
    }
}

/// An access prepared on one keep-alive, recorded by [`Ticket::finish`] once it is enqueued.
enum Ticket<'k> {
    None,
    Cuda(&'k dyn SharedTrack, RawEvent),
    Owner(&'k SharedOwner, bool),
}

impl Ticket<'_> {
    /// Records the access, enqueued on `stream`. Owners note the operation's one fence on
    /// `stream`, `fence`, recorded by the first of them that needs it.
    fn finish(self, stream: &Arc<CudaStream>, fence: &mut Option<Arc<Fence>>) -> Result<()> {
        match self {
            Ticket::None => Ok(()),
            Ticket::Cuda(t, e) => t.finish(stream, e),
            Ticket::Owner(o, write) => {
                let f = match fence {
                    Some(f) => f.clone(),
                    None => fence.insert(Fence::record(stream, false)?).clone(),
                };
                o.note(stream, write, f);
                Ok(())
            }
        }
    }
}

impl<'a> KeepAlive<'a> {
    pub(crate) fn borrow() -> Self {
        KeepAlive::Borrow(PhantomData)
    }

    fn tracked(track: impl CudaTrack + 'static) -> Self {
        KeepAlive::Cuda(
            Arc::new(Tracked {
                track: Mutex::new(track),
                address: AtomicU64::new(0),
                known: AtomicBool::new(false),
            }),
            PhantomData,
        )
    }

    pub(crate) fn cuda_slice<T: Send + Sync + 'static>(slice: &'a CudaSlice<T>) -> Self {
        Self::tracked(SliceBorrow::<T, false>(NonNull::from(slice)))
    }

    pub(crate) fn cuda_slice_mut<T: Send + Sync + 'static>(slice: &'a mut CudaSlice<T>) -> Self {
        Self::tracked(SliceBorrow::<T, true>(NonNull::from(slice)))
    }

    /// The keep-alive of an owned allocation: writable tracking through `slice`.
    ///
    /// # Safety
    /// `slice` points to a live `CudaSlice` that outlives every use of the result (prepare and
    /// stream lookups), and is used otherwise only as a `&`/`&mut` borrow that excludes those
    /// uses (the array's own borrows).
    pub(crate) unsafe fn cuda_owned<T: Send + Sync + 'static>(
        slice: NonNull<CudaSlice<T>>,
    ) -> Self {
        Self::tracked(SliceBorrow::<T, true>(slice))
    }

    /// The device address of cudarc memory (the start of the slice or view it was made from),
    /// learnt on first use; `None` for foreign and raw memory, whose handles hold their
    /// address.
    pub(crate) fn cuda_address(&self) -> Option<u64> {
        match self {
            KeepAlive::Cuda(t, _) => Some(t.address()),
            KeepAlive::Borrow(_) | KeepAlive::Owner(_) => None,
        }
    }

    /// Whether this is the keep-alive of cudarc memory, whose handles hold their offset from
    /// [`cuda_address`](Self::cuda_address) instead of their address.
    pub(crate) fn is_cuda(&self) -> bool {
        matches!(self, KeepAlive::Cuda(..))
    }

    /// The stream the memory was allocated on, when devspan knows it: cudarc memory knows its
    /// stream; foreign and raw memory does not.
    pub(crate) fn stream(&self) -> Option<Arc<CudaStream>> {
        match self {
            KeepAlive::Cuda(t, _) => Some(t.stream()),
            KeepAlive::Borrow(_) | KeepAlive::Owner(_) => None,
        }
    }

    pub(crate) fn cuda_view<T: Send + Sync + 'static>(view: CudaView<'a, T>) -> Self {
        // SAFETY: only the lifetime changes (the same type otherwise); the view is used only
        // through this keep-alive, during `'a`, and dropping it dereferences nothing.
        let view = unsafe { std::mem::transmute::<CudaView<'a, T>, CudaView<'static, T>>(view) };
        Self::tracked(view)
    }

    pub(crate) fn cuda_view_mut<T: Send + Sync + 'static>(view: CudaViewMut<'a, T>) -> Self {
        // SAFETY: as in `cuda_view`.
        let view =
            unsafe { std::mem::transmute::<CudaViewMut<'a, T>, CudaViewMut<'static, T>>(view) };
        Self::tracked(view)
    }

    pub(crate) fn owner(owner: Arc<dyn DeviceOwner>) -> Self {
        KeepAlive::Owner(SharedOwner::new(owner))
    }

    fn same_tracker(&self, other: &KeepAlive<'_>) -> bool {
        match (self, other) {
            (KeepAlive::Cuda(a, _), KeepAlive::Cuda(b, _)) => {
                std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
            }
            (KeepAlive::Owner(a), KeepAlive::Owner(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    fn prepare(
        &self,
        stream: &CudaStream,
        write: bool,
        cap: &mut CaptureCheck<'_>,
    ) -> Result<Ticket<'_>> {
        Ok(match self {
            KeepAlive::Borrow(_) => Ticket::None,
            KeepAlive::Cuda(t, _) => match t.prepare(stream, write, cap)? {
                Some(e) => Ticket::Cuda(&**t, e),
                None => Ticket::None,
            },
            KeepAlive::Owner(o) => match o.prepare(stream, write, cap)? {
                true => Ticket::Owner(o, write),
                false => Ticket::None,
            },
        })
    }

    /// Runs `f`, which enqueues work on `stream` that reads (or, with `write`, writes) this
    /// memory: the stream first waits for earlier conflicting work, and the access is recorded
    /// after `f` (whatever it returns, since it may have enqueued part of its work). On a
    /// stream capturing a graph, tracked memory follows [`crate::capture`]'s rules instead.
    fn access<R>(
        &self,
        stream: &Arc<CudaStream>,
        write: bool,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let t = self.prepare(stream, write, &mut CaptureCheck::new(stream))?;
        let r = f();
        let recorded = t.finish(stream, &mut None);
        let r = r?;
        recorded?;
        Ok(r)
    }

    /// [`access`](Self::access) for work that reads this memory.
    pub(crate) fn reading<R>(
        &self,
        stream: &Arc<CudaStream>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.access(stream, false, f)
    }

    /// [`access`](Self::access) for work that writes this memory.
    pub(crate) fn writing<R>(
        &self,
        stream: &Arc<CudaStream>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.access(stream, true, f)
    }

    /// Runs `f` with `self` written and `src` read. Each keep-alive is prepared and recorded on
    /// its own; a shared one is taken as written (the write's wait and record cover the read).
    pub(crate) fn writing_reading<R>(
        &self,
        src: &KeepAlive<'_>,
        stream: &Arc<CudaStream>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        if self.same_tracker(src) {
            return self.writing(stream, f);
        }
        let mut cap = CaptureCheck::new(stream);
        let tw = self.prepare(stream, true, &mut cap)?;
        let tr = src.prepare(stream, false, &mut cap)?;
        let r = f();
        let mut fence = None;
        let recorded_w = tw.finish(stream, &mut fence);
        let recorded_r = tr.finish(stream, &mut fence);
        let r = r?;
        recorded_w?;
        recorded_r?;
        Ok(r)
    }

    /// Runs `f`, which enqueues work on `stream` that accesses every keep-alive in `ops` (each
    /// with `true` where it is written): as [`writing_reading`](Self::writing_reading) for any
    /// number of operands. Keep-alives that share a tracker are prepared once, as written if
    /// any of them is.
    pub(crate) fn accessing_all<R>(
        ops: &[(&KeepAlive<'_>, bool)],
        stream: &Arc<CudaStream>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let mut unique: Vec<(&KeepAlive<'_>, bool)> = Vec::with_capacity(ops.len());
        for &(k, write) in ops {
            match unique.iter_mut().find(|(u, _)| u.same_tracker(k)) {
                Some(u) => u.1 |= write,
                None => unique.push((k, write)),
            }
        }
        let mut cap = CaptureCheck::new(stream);
        let mut tickets = Vec::with_capacity(unique.len());
        for (k, write) in unique {
            tickets.push(k.prepare(stream, write, &mut cap)?);
        }
        let r = f();
        let mut recorded = Ok(());
        let mut fence = None;
        for t in tickets {
            let done = t.finish(stream, &mut fence);
            if recorded.is_ok() {
                recorded = done;
            }
        }
        let r = r?;
        recorded?;
        Ok(r)
    }

    /// Runs `f`, which enqueues work on `stream` that writes this memory and reads `src`'s,
    /// which lives on the device of `other` (another device, or any stream while a cross-device
    /// path is forced). `src`'s access is prepared and recorded on `other`, in its own device's
    /// context: `stream` first waits for `other` (which has waited for the earlier conflicting
    /// work on `src`), and `other` waits for `stream` after `f`, whatever `f` returns, so that
    /// later work on `src`, and its release, follow the read. Neither stream may be capturing
    /// a graph (the caller refuses that first).
    pub(crate) fn writing_reading_across<R>(
        &self,
        src: &KeepAlive<'_>,
        stream: &Arc<CudaStream>,
        other: &Arc<CudaStream>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let tr = src.prepare(other, false, &mut CaptureCheck::new(other))?;
        let tw = self.prepare(stream, true, &mut CaptureCheck::new(stream))?;
        stream.join(other)?;
        let r = f();
        let recorded_w = tw.finish(stream, &mut None);
        let recorded_r = match other.join(stream) {
            Ok(()) => tr.finish(other, &mut None),
            Err(e) => {
                // `other` cannot follow the work: the host waits for it instead, so that the
                // read has completed before later work on `src` or its release.
                let _ = stream.synchronize();
                Err(e.into())
            }
        };
        let r = r?;
        recorded_w?;
        recorded_r?;
        Ok(r)
    }
}
