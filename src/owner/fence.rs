//! [`Fence`]: one point in a stream's work, recorded once and shared by every log it was noted
//! in.
//!
//! An operation that accesses several owners' memory records one fence on its stream and
//! notes it in each owner's log, rather than recording one event per owner. A fence is never
//! recorded again, so once a query has seen it complete it stays complete: later queries, waits
//! and releases that find it so make no driver call. Its event comes from, and goes back to,
//! its context's pool ([`Runtime::events`](crate::driver::runtime::Runtime)), so that
//! operations do not create and destroy an event each.
//!
//! A stream runs its work in order, so a fence seen complete also completes every fence
//! recorded before it on the same stream. Each fence takes a place in its stream's
//! [`StreamMark`] (streams told apart by the driver's stream id, which no later stream reuses,
//! unlike a handle's value), and a completion seen on one fence is known for all earlier ones
//! without asking the driver about each.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaEvent, CudaStream};

use crate::driver::runtime;
use crate::error::Result;

/// How many idle events a context's pool keeps; more are destroyed when their fences drop.
const KEPT_EVENTS: usize = 256;

/// How many streams' marks a context keeps (the streams used most recently first kept). A
/// stream whose mark was dropped gets a new one: its later fences are then ordered among
/// themselves only.
const KEPT_MARKS: usize = 64;

/// The fences recorded on one stream, in the stream's order (see the [module docs](self)).
pub(crate) struct StreamMark {
    /// The driver's id of the stream.
    id: u64,
    /// How many fences have been recorded with this mark. Held while a fence is recorded, so
    /// that places follow the order of the records on the stream.
    recorded: Mutex<u64>,
    /// The place of the latest fence seen complete (0: none).
    completed: AtomicU64,
}

/// The mark of the stream whose driver id is `id`, in `marks` (a context's).
fn mark_of(marks: &Mutex<Vec<Arc<StreamMark>>>, id: u64) -> Arc<StreamMark> {
    let mut marks = runtime::lock(marks);
    if let Some(m) = marks.iter().find(|m| m.id == id) {
        return m.clone();
    }
    let m = Arc::new(StreamMark {
        id,
        recorded: Mutex::new(0),
        completed: AtomicU64::new(0),
    });
    if marks.len() >= KEPT_MARKS {
        marks.remove(0);
    }
    marks.push(m.clone());
    m
}

/// The work queued on one stream up to one point (see the [module docs](self)).
pub(crate) struct Fence {
    /// `Some` until the drop gives it back to the pool.
    event: Option<CudaEvent>,
    /// Set once a query or a host wait has seen the work complete.
    done: AtomicBool,
    /// The stream's mark and this fence's place in it; `None` where the driver gave no
    /// stream id.
    place: Option<(Arc<StreamMark>, u64)>,
}

impl Fence {
    /// A fence after the work queued on `stream` so far. `capturing`: the stream may be
    /// capturing a graph, where the driver refuses to give a stream id and the refusal ends the
    /// capture; such a fence takes no place in the stream's order.
    pub(crate) fn record(stream: &CudaStream, capturing: bool) -> Result<Arc<Fence>> {
        let ctx = stream.context();
        let rt = runtime::of(ctx);
        let pooled = runtime::lock(&rt.events).pop();
        let event = match pooled {
            Some(e) => e,
            None => ctx.new_event(None)?,
        };
        // A pooled event may still be pending from an earlier fence: recording it again does
        // not change the waits already queued on it, and no earlier fence holds it any more.
        let mut fence = Fence {
            event: Some(event),
            done: AtomicBool::new(false),
            place: None,
        };
        // Bound through the stream's context: a pooled event may come from another
        // `CudaContext` handle of the same context, whose stored errors are not this call's.
        crate::device::bind_context(ctx)?;
        let (cu_event, cu_stream) = (fence.event().cu_event(), stream.cu_stream());
        // Without an id (an older driver, a capture) the fence is known complete by its own
        // queries only.
        let id = if capturing {
            None
        } else {
            // SAFETY: the stream is live (the caller's borrow), in its context, which is
            // current, and not capturing.
            unsafe { crate::driver::stream_id(cu_stream) }.ok()
        };
        let mark = id.map(|id| mark_of(&rt.marks, id));
        let record = || {
            // SAFETY: the event is live (the fence holds it) and belongs to `stream`'s context
            // (the pool is per context), which is current; the stream is live.
            unsafe { crate::driver::record_event(cu_event, cu_stream) }
        };
        match mark {
            Some(mark) => {
                // Placed under the mark's lock: places follow the records' order.
                let mut recorded = runtime::lock(&mark.recorded);
                record()?;
                *recorded += 1;
                let place = *recorded;
                drop(recorded);
                fence.place = Some((mark, place));
            }
            None => record()?,
        }
        Ok(Arc::new(fence))
    }

    pub(crate) fn event(&self) -> &CudaEvent {
        self.event
            .as_ref()
            .expect("a fence holds its event until it is dropped")
    }

    /// Whether the fence was recorded on the stream whose driver id is `id`.
    pub(crate) fn recorded_on(&self, id: u64) -> bool {
        self.place.as_ref().is_some_and(|(mark, _)| mark.id == id)
    }

    /// Whether the work is known to have completed, without asking the driver: this fence, or
    /// a later one of the same stream, was seen complete.
    pub(crate) fn known_complete(&self) -> bool {
        self.done.load(Ordering::Acquire)
            || self
                .place
                .as_ref()
                .is_some_and(|(mark, place)| mark.completed.load(Ordering::Acquire) >= *place)
    }

    /// Notes that the work has completed, and with it that of every earlier fence of the
    /// stream.
    fn seen_complete(&self) {
        self.done.store(true, Ordering::Release);
        if let Some((mark, place)) = &self.place {
            mark.completed.fetch_max(*place, Ordering::AcqRel);
        }
    }

    /// Whether the work has completed (`cuEventQuery`, unless already seen so).
    pub(crate) fn query(&self) -> Result<bool> {
        if self.known_complete() {
            return Ok(true);
        }
        let complete = self.event().try_is_complete()?;
        if complete {
            self.seen_complete();
        }
        Ok(complete)
    }

    /// Blocks the calling thread until the work has completed. A failed wait is tried once more
    /// (cudarc first reports, and clears, an error stored in the context).
    pub(crate) fn synchronize(&self) -> Result<()> {
        if self.known_complete() {
            return Ok(());
        }
        let event = self.event();
        let wait = || -> Result<()> {
            event.context().bind_to_thread()?;
            // SAFETY: the event is live (this fence holds it) and belongs to the context bound
            // just above.
            unsafe { crate::driver::synchronize_event(event.cu_event()) }
        };
        wait().or_else(|_| wait())?;
        self.seen_complete();
        Ok(())
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        let Some(event) = self.event.take() else {
            return;
        };
        let rt = runtime::of(event.context());
        let mut pool = runtime::lock(&rt.events);
        if pool.len() < KEPT_EVENTS {
            pool.push(event);
        } else {
            drop(pool);
            // Destroys the event (cudarc's drop binds its context first).
            drop(event);
        }
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("known_complete", &self.known_complete())
            .finish()
    }
}
