//! The per-context runtime: what devspan keeps for one CUDA context, in one place.
//!
//! - the loaded kernels and their occupancy ([`kernels::Cache`](crate::kernels::Cache));
//! - the probe streams on which waits are issued during a graph capture
//!   ([`capture`](crate::capture));
//! - the devices whose memory this context reads through peer access devspan enabled
//!   ([`peer`](crate::peer));
//! - the allocations whose free waits for a capture to end (`capture::drop_slice`);
//! - idle events, which the owner logs' fences take and give back
//!   ([`Fence`](crate::owner::fence::Fence)).
//!
//! A context's runtime is made at its first use and kept for the life of the process, keyed by
//! the context's handle. Everything it holds apart from the peer list keeps the context alive
//! (a loaded kernel holds its module, a probe or a deferred free holds its stream), so while a
//! runtime holds any of it the handle cannot be reused by another context; a context that has
//! loaded a kernel is never released. A runtime whose only content is its peer list can outlive
//! its context, and a later context given the same handle then inherits the list: the copy
//! between devices skips enabling peer access, and the access check that follows it
//! (`CU_POINTER_ATTRIBUTE_ACCESS_FLAGS`, asked for the source memory itself) sends the copy
//! down the staged path when the access is missing.
//!
//! Process-wide on purpose, outside the runtime: the registry of primary contexts
//! (`device::context`), the page-locked staging pool (its memory is portable, usable from every
//! context), the embedded PTX and what is read once from the environment and the driver
//! library, the owner logs' last-record slots, and the Python binding's state.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::CudaContext;

/// What devspan keeps for one context ([module docs](self)).
pub(crate) struct Runtime {
    /// The context's handle (`CUcontext` as an integer).
    key: usize,
    /// Loaded kernels and their occupancy.
    pub(crate) kernels: Mutex<crate::kernels::Cache>,
    /// Probe streams not in use.
    pub(crate) probes: Mutex<Vec<crate::capture::Probe>>,
    /// Ordinals of the devices whose memory this context reads through peer access that
    /// devspan enabled.
    pub(crate) peers: Mutex<Vec<usize>>,
    /// Allocations of this context whose free waits for their stream's capture to end.
    pub(crate) deferred: Mutex<Vec<crate::capture::Deferred>>,
    /// Events of this context no fence holds.
    pub(crate) events: Mutex<Vec<cudarc::driver::CudaEvent>>,
    /// The order of the fences recorded on each of the streams used most recently, by the
    /// driver's stream id ([`crate::owner::fence`]).
    pub(crate) marks: Mutex<Vec<Arc<crate::owner::fence::StreamMark>>>,
}

/// Locks `m`, recovering from poisoning (every structure here stays consistent across a
/// panic: entries are added or removed whole).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

static RUNTIMES: Mutex<Vec<Arc<Runtime>>> = Mutex::new(Vec::new());

thread_local! {
    /// The runtimes this thread has used: found without the registry's lock on every launch.
    static SEEN: RefCell<Vec<Arc<Runtime>>> = const { RefCell::new(Vec::new()) };
}

/// The runtime of `ctx`, made at its first use.
pub(crate) fn of(ctx: &CudaContext) -> Arc<Runtime> {
    let key = ctx.cu_ctx() as usize;
    // A thread being torn down has no cache left: it asks the registry.
    let seen = SEEN
        .try_with(|s| s.borrow().iter().find(|rt| rt.key == key).cloned())
        .ok()
        .flatten();
    if let Some(rt) = seen {
        return rt;
    }
    let rt = {
        let mut all = lock(&RUNTIMES);
        match all.iter().find(|rt| rt.key == key) {
            Some(rt) => rt.clone(),
            None => {
                let rt = Arc::new(Runtime {
                    key,
                    kernels: Mutex::new(crate::kernels::Cache::default()),
                    probes: Mutex::new(Vec::new()),
                    peers: Mutex::new(Vec::new()),
                    deferred: Mutex::new(Vec::new()),
                    events: Mutex::new(Vec::new()),
                    marks: Mutex::new(Vec::new()),
                });
                all.push(rt.clone());
                rt
            }
        }
    };
    let _ = SEEN.try_with(|s| s.borrow_mut().push(rt.clone()));
    rt
}

/// Every runtime made so far.
pub(crate) fn all() -> Vec<Arc<Runtime>> {
    lock(&RUNTIMES).clone()
}
