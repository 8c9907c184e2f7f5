//! [`SharedOwner`]: a shared owner with the log of the streams devspan used its memory on, and
//! the drop that orders the owner's release after that work.

use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaStream;

use super::fence::Fence;
use super::{DeviceOwner, lock};
use crate::capture::{CaptureCheck, RelaxedMode};
use crate::error::Result;

/// One stream's part in an [`SharedOwner`]'s log.
struct StreamUse {
    stream: Arc<CudaStream>,
    /// After the latest devspan operation on the memory on `stream`.
    fence: Arc<Fence>,
    /// Whether any of those operations wrote the memory.
    wrote: bool,
}

/// Whether `a` and `b` are surely one stream: both the legacy default stream of one context.
/// (Any other handle may name different streams at different times: the per-thread default
/// stream names one stream per thread, and a destroyed stream's handle may be given to a new
/// one.)
fn same_legacy_stream(a: &CudaStream, b: &CudaStream) -> bool {
    a.cu_stream().is_null()
        && b.cu_stream().is_null()
        && a.context().cu_ctx() == b.context().cu_ctx()
}

/// The driver's id of `stream`, asked with its context current (which the special handles
/// need); `None` where the driver gives none, and for a stream capturing a graph, where asking
/// is not allowed.
fn stream_id_of(stream: &CudaStream) -> Option<u64> {
    if crate::capture::is_capturing(stream).unwrap_or(true) {
        return None;
    }
    crate::device::bind_context(stream.context()).ok()?;
    // SAFETY: the stream is live (the caller's borrow), in its context, which is current.
    unsafe { crate::driver::stream_id(stream.cu_stream()) }.ok()
}

/// A [`DeviceOwner`] with the log of the streams devspan used its memory on: the keep-alive
/// that views over foreign memory hold by `Arc`, shareable between views made separately.
///
/// [`DeviceView::from_raw_parts`](crate::DeviceView::from_raw_parts) starts a new log for
/// each call; a binding that rebuilds views of the same memory for every call (a language
/// binding holding a foreign tensor) makes one `SharedOwner` and builds each view with
/// [`DeviceView::from_raw_parts_shared`](crate::DeviceView::from_raw_parts_shared), so that
/// every operation on any of them waits for the conflicting work of the others, and the owner
/// is released once, after all of it.
///
/// Work that the binding enqueues on the memory outside devspan's operations takes part in the
/// same ordering through [`order_before`](Self::order_before) (before it is enqueued) and
/// [`record`](Self::record) (after).
///
/// Dropping the last `Arc` releases the owner after the logged work: stream-ordered on the
/// owner's [`release_stream`](DeviceOwner::release_stream) where it names one, otherwise after
/// the host has waited for that work. Where the host must not block in that drop (a thread that
/// other work waits on), check [`is_settled`](Self::is_settled) or call
/// [`wait_host`](Self::wait_host) first.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use std::sync::Arc;
/// use devspan::{DeviceView, SharedOwner};
///
/// let stream = devspan::default_stream(0)?;
/// let slice = stream.alloc_zeros::<f32>(6)?;
/// let ptr = devspan::interop::cuda_slice_address(&slice);
/// let owner = SharedOwner::new(Arc::new(slice));
/// // SAFETY: the slice owns 6 f32 at `ptr` and lives in `owner`.
/// let a = unsafe {
///     DeviceView::<f32, _>::from_raw_parts_shared(ptr, 6, ndarray::Ix1(6), &[1], 0, 0, &owner)?
/// };
/// let b = unsafe {
///     DeviceView::<f32, _>::from_raw_parts_shared(ptr, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, &owner)?
/// };
/// let host = b.to_host()?; // ordered after the work on `a`, on any stream
/// assert_eq!(host.len(), a.len());
/// # Ok(()) }
/// ```
pub struct SharedOwner {
    /// Taken, and dropped or leaked, in `SharedOwner`'s drop.
    pub(super) owner: ManuallyDrop<Arc<dyn DeviceOwner>>,
    log: Mutex<Vec<StreamUse>>,
}

impl SharedOwner {
    /// A new log around `owner`, with no work recorded.
    pub fn new(owner: Arc<dyn DeviceOwner>) -> Arc<Self> {
        Arc::new(SharedOwner {
            owner: ManuallyDrop::new(owner),
            log: Mutex::new(Vec::new()),
        })
    }

    /// Makes `stream` wait for devspan's work on other streams that conflicts with this access
    /// (writes, and for a write every earlier access); `Ok(true)`: the access is to be recorded.
    /// Inside a capture (`cap`) the stream waits for nothing: that work must have completed
    /// (`Err(StreamCapture)` otherwise), and `Ok(false)`: nothing is recorded.
    pub(super) fn prepare(
        &self,
        stream: &CudaStream,
        write: bool,
        cap: &mut CaptureCheck<'_>,
    ) -> Result<bool> {
        if !cap.capturing()? {
            self.order_before(stream, write)?;
            return Ok(true);
        }
        let log = lock(&self.log);
        // The log's events are recorded outside any capture (nothing is recorded inside one),
        // so querying them is allowed, in the relaxed mode.
        let _relaxed = RelaxedMode::enter()?;
        for u in log
            .iter()
            .filter(|u| *u.stream != *stream && (write || u.wrote))
        {
            if !u.fence.query()? {
                return Err(crate::capture::pending(write));
            }
        }
        Ok(false)
    }

    /// Makes `stream` (not capturing a graph) wait for devspan's work on other streams that an
    /// access conflicts with: writes, and for a write every earlier access.
    ///
    /// A stream is not made to wait for its own work. An entry of a stream with `stream`'s
    /// handle may name another stream than the one logged (the per-thread default stream of
    /// another thread, or a destroyed stream's handle given to a new one): it is passed over
    /// where the driver's stream ids (which no later stream reuses) show the same stream, or
    /// where both are the legacy default stream of one context, and waited for otherwise (on
    /// the same stream the wait orders nothing new). [`record`](Self::record) then replaces
    /// that entry's fence, and the new one covers the old one's work either way. Work already
    /// seen complete is not waited for.
    pub fn order_before(&self, stream: &CudaStream, write: bool) -> Result<()> {
        let log = lock(&self.log);
        // The driver's id of `stream`, asked for at the first entry of the same handle.
        let mut own: Option<Option<u64>> = None;
        for u in log.iter().filter(|u| {
            (write || u.wrote || *u.stream == *stream)
                && !u.fence.known_complete()
                && !same_legacy_stream(&u.stream, stream)
        }) {
            if u.stream.cu_stream() == stream.cu_stream() {
                let id = *own.get_or_insert_with(|| stream_id_of(stream));
                if id.is_some_and(|id| u.fence.recorded_on(id)) {
                    continue;
                }
            }
            stream.wait(u.fence.event())?;
        }
        Ok(())
    }

    /// Whether every recorded access has completed. A fence whose query fails counts as
    /// completed, as in [`wait_host`](Self::wait_host), which gives up on it too. Work once
    /// seen complete is not asked about again.
    pub fn is_settled(&self) -> bool {
        let mut unlimited = usize::MAX;
        self.is_settled_asking(&mut unlimited)
    }

    /// Whether every recorded access is already known to have completed (or none was
    /// recorded), without asking the driver: a cheaper, more conservative
    /// [`is_settled`](Self::is_settled).
    pub fn is_known_settled(&self) -> bool {
        let mut none = 0;
        self.is_settled_asking(&mut none)
    }

    /// [`is_settled`](Self::is_settled) asking the driver at most `*queries` times (each query
    /// made is taken from it): `false` as soon as an access has not completed or is not known
    /// to have and no query is left. For callers that poll many owners often and can leave the
    /// rest for later.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use std::sync::Arc;
    /// use devspan::SharedOwner;
    ///
    /// let stream = devspan::default_stream(0)?;
    /// let owner = SharedOwner::new(Arc::new(stream.alloc_zeros::<f32>(6)?));
    /// owner.record(&stream, true)?;
    /// stream.synchronize()?;
    /// let mut queries = 1;
    /// assert!(owner.is_settled_asking(&mut queries));
    /// assert_eq!(queries, 0);
    /// // Now known: no query needed.
    /// assert!(owner.is_settled_asking(&mut queries));
    /// # Ok(()) }
    /// ```
    pub fn is_settled_asking(&self, queries: &mut usize) -> bool {
        lock(&self.log).iter().all(|u| {
            if u.fence.known_complete() {
                return true;
            }
            if *queries == 0 {
                return false;
            }
            *queries -= 1;
            !matches!(u.fence.query(), Ok(false))
        })
    }

    /// Blocks the calling thread until every recorded access has completed; a failed wait is
    /// tried once more (cudarc first reports, and clears, an error stored in the context). The
    /// log is not locked while the thread waits, so other threads may order work after it.
    pub fn wait_host(&self) {
        let fences: Vec<Arc<Fence>> = lock(&self.log).iter().map(|u| u.fence.clone()).collect();
        for fence in fences {
            let _ = fence.synchronize();
        }
    }

    /// Records an access enqueued on `stream` (a write with `write`): by a devspan operation,
    /// or by work outside them (an import whose data is ready on `stream`, a consumer's
    /// stream). Later accesses on other streams that conflict with it wait for it, and the
    /// owner's release follows it.
    pub fn record(&self, stream: &Arc<CudaStream>, write: bool) -> Result<()> {
        let capturing = crate::capture::is_capturing(stream).unwrap_or(true);
        self.note(stream, write, Fence::record(stream, capturing)?);
        Ok(())
    }

    /// Notes an access enqueued on `stream` before `fence` (recorded on `stream` after it).
    pub(super) fn note(&self, stream: &Arc<CudaStream>, write: bool, fence: Arc<Fence>) {
        let mut log = lock(&self.log);
        if let Some(u) = log.iter_mut().find(|u| *u.stream == **stream) {
            let old = std::mem::replace(&mut u.fence, fence);
            u.wrote |= write;
            drop(log);
            // Its event goes back to the pool outside the log's lock.
            drop(old);
            return;
        }
        log.push(StreamUse {
            stream: stream.clone(),
            fence,
            wrote: write,
        });
    }
}

impl std::fmt::Debug for SharedOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedOwner")
            .field("owner", &self.owner.describe())
            .field("streams", &lock(&self.log).len())
            .finish()
    }
}

impl Drop for SharedOwner {
    fn drop(&mut self) {
        // SAFETY: `owner` is taken once, here, and not used again.
        let owner = unsafe { ManuallyDrop::take(&mut self.owner) };
        // The waits below, and an owner that frees through a stream, make a context current;
        // the thread's own is restored afterwards.
        let _current = crate::device::ContextGuard::save();
        let log = std::mem::take(self.log.get_mut().unwrap_or_else(|p| p.into_inner()));
        let release = owner.release_stream();
        // Work known to have completed (an empty log too) needs neither order nor wait.
        if !log.iter().all(|u| u.fence.known_complete()) {
            // The host waits below are allowed while a stream captures a graph in the relaxed
            // capture mode only. (A log with entries means the driver is loaded.)
            let _relaxed = RelaxedMode::enter().ok();
            // Stream-ordered release: the release stream waits for every entry, its own
            // handle's too (which may name another stream, as in `order_before`); a release
            // stream that is capturing a graph cannot wait on work outside it, and is taken as
            // ordered only when all the work was queued on its handle. Otherwise the host waits
            // for all of it.
            let ordered =
                release
                    .as_ref()
                    .is_some_and(|rs| match crate::capture::is_capturing(rs) {
                        Ok(false) => log.iter().all(|u| rs.wait(u.fence.event()).is_ok()),
                        _ => log.iter().all(|u| *u.stream == **rs),
                    });
            if !ordered && !log.iter().all(|u| u.fence.synchronize().is_ok()) {
                // The driver could neither order nor wait for the work, which may still use
                // the memory: never release it.
                std::mem::forget(owner);
                return;
            }
        }
        // Dropping the fences gives their events back.
        drop(log);
        if let Some(rs) = release {
            // An owner that frees through a stream (cudarc's `CudaSlice`) needs that stream's
            // context current, and this thread may have another one or none.
            let _ = crate::device::bind_context(rs.context());
        }
        drop(owner);
    }
}
