//! [`Fence`]: one point in a stream's work, recorded once and shared by every log it was noted
//! in.
//!
//! An operation that accesses several owners' memory records one fence on its stream and
//! notes it in each owner's log, rather than recording one event per owner. A fence is never
//! recorded again, so once a query has seen it complete it stays complete: later queries, waits
//! and releases that find it so make no driver call. Its event comes from, and goes back to,
//! its context's pool ([`Runtime::events`](crate::driver::runtime::Runtime)), so that
//! operations do not create and destroy an event each.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::{CudaEvent, CudaStream};

use crate::driver::runtime;
use crate::error::Result;

/// How many idle events a context's pool keeps; more are destroyed when their fences drop.
const KEPT_EVENTS: usize = 256;

/// The work queued on one stream up to one point (see the [module docs](self)).
pub(crate) struct Fence {
    /// `Some` until the drop gives it back to the pool.
    event: Option<CudaEvent>,
    /// Set once a query or a host wait has seen the work complete.
    done: AtomicBool,
}

impl Fence {
    /// A fence after the work queued on `stream` so far.
    pub(crate) fn record(stream: &CudaStream) -> Result<Arc<Fence>> {
        let ctx = stream.context();
        let pooled = runtime::lock(&runtime::of(ctx).events).pop();
        let event = match pooled {
            Some(e) => e,
            None => ctx.new_event(None)?,
        };
        // A pooled event may still be pending from an earlier fence: recording it again does
        // not change the waits already queued on it, and no earlier fence holds it any more.
        let fence = Fence {
            event: Some(event),
            done: AtomicBool::new(false),
        };
        // Bound through the stream's context: a pooled event may come from another
        // `CudaContext` handle of the same context, whose stored errors are not this call's.
        crate::device::bind_context(ctx)?;
        // SAFETY: the event is live (the fence holds it) and belongs to `stream`'s context (the
        // pool is per context), which is current; the stream is live (the caller's borrow).
        unsafe { crate::driver::record_event(fence.event().cu_event(), stream.cu_stream()) }?;
        Ok(Arc::new(fence))
    }

    pub(crate) fn event(&self) -> &CudaEvent {
        self.event
            .as_ref()
            .expect("a fence holds its event until it is dropped")
    }

    /// Whether the work is known to have completed, without asking the driver.
    pub(crate) fn known_complete(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Whether the work has completed (`cuEventQuery`, unless already seen so).
    pub(crate) fn query(&self) -> Result<bool> {
        if self.known_complete() {
            return Ok(true);
        }
        let complete = self.event().try_is_complete()?;
        if complete {
            self.done.store(true, Ordering::Release);
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
        self.done.store(true, Ordering::Release);
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
