//! CUDA stream capture: what devspan does when the stream an operation runs on is capturing a
//! graph (the rules are stated for users in the crate docs, "Graph capture").
//!
//! Inside a capture the driver forbids explicit dependencies on work outside it: a capturing
//! stream that waits on an event recorded outside the capture invalidates the capture
//! (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`), and querying or synchronising an event recorded
//! inside one invalidates it too. An event recorded on a capturing stream stands for nodes of the
//! capture graph, not for work that will run, and a stream outside the capture that waits on it
//! is pulled into the capture. So, on a capturing stream, devspan:
//!
//! - issues no wait on an event recorded outside the capture. It requires the earlier accesses
//!   it would otherwise wait for to have completed, which it learns by querying their events, and
//!   refuses with `Err(StreamCapture)` before enqueuing anything when they have not;
//! - records no event: graph replays are launched by the user, outside devspan's tracking;
//! - reaches cudarc's events of an allocation only through cudarc's `device_ptr(_mut)`, which
//!   makes the stream it is given wait on them. It gives cudarc a probe stream of its own, never
//!   capturing when handed out, and then asks the driver whether the probe is idle (every access
//!   complete), still waiting (refused), or pulled into a capture (the accesses were captured:
//!   the operation's stream then waits on the probe, which orders it after them inside the graph
//!   and joins the probe back);
//! - refuses operations that cannot be captured (host transfers wait on the host; allocations
//!   would be graph allocations whose memory exists only while the graph runs);
//! - frees a device array dropped while its stream captures once the capture has ended
//!   ([`drop_slice`]), since cudarc's free through that stream would invalidate it.
//!
//! The driver calls devspan makes for these checks (event and stream queries) are "potentially
//! unsafe" under the global and thread-local capture modes, which would fail them and invalidate
//! the capture; they run with the calling thread switched to the relaxed mode
//! ([`RelaxedMode`]), as CUDA documents for libraries.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DriverError};

use crate::driver::runtime;
use crate::driver::{self, CUstreamCaptureMode, CUstreamCaptureStatus};
use crate::error::{Error, ErrorKind, Result};

/// Whether `stream` is capturing a graph. `Err(StreamCapture)` for a stream whose capture has
/// been invalidated, and for the legacy default stream while another stream of its context
/// captures (the driver forbids using it then).
pub(crate) fn is_capturing(stream: &CudaStream) -> Result<bool> {
    use CUstreamCaptureStatus::*;
    let cs = stream.cu_stream();
    // The handles of the legacy and per-thread default streams (null, `CU_STREAM_LEGACY`,
    // `CU_STREAM_PER_THREAD`) name the stream of the current context; other handles name their
    // own context's stream, and are asked first without making it current (which this check,
    // made for every operation on tracked memory, would otherwise repeat), then, should that
    // fail, once more with it current.
    let special = (cs as usize) <= 2;
    // SAFETY: `stream` is a live stream; the call writes one status.
    let unbound = (!special).then(|| unsafe { driver::capture_status(cs) });
    let status = match unbound {
        Some(Ok(status)) => Ok(status),
        _ => {
            stream.context().bind_to_thread()?;
            // SAFETY: as above, with the stream's context current.
            unsafe { driver::capture_status(cs) }
        }
    };
    match status {
        Ok(CU_STREAM_CAPTURE_STATUS_NONE) => Ok(false),
        Ok(CU_STREAM_CAPTURE_STATUS_ACTIVE) => Ok(true),
        Ok(CU_STREAM_CAPTURE_STATUS_INVALIDATED) => Err(Error::capture(
            "the stream's graph capture has been invalidated by an earlier call; end the capture \
             (which then fails) before enqueuing work on the stream",
        )),
        Err(e)
            if e.kind()
                == &ErrorKind::Driver(DriverError(
                    driver::CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                )) =>
        {
            Err(Error::capture(
                "the legacy default stream cannot be used while another stream of its context \
                 is capturing a graph; use a stream created for the work",
            ))
        }
        Err(e) => Err(e),
    }
}

/// `Err(StreamCapture)` naming `what` and `why` when `stream` is capturing (or cannot be used
/// because of a capture, as [`is_capturing`] says); `Ok` otherwise. For operations that cannot
/// be captured, called before they touch the stream.
pub(crate) fn refuse(stream: &CudaStream, what: &str, why: &str) -> Result<()> {
    if is_capturing(stream)? {
        return Err(Error::capture(format!(
            "{what} cannot be captured into a CUDA graph: {why}; nothing was enqueued and the \
             capture is still usable"
        )));
    }
    Ok(())
}

/// Why allocations are refused on a capturing stream.
pub(crate) const ALLOCATION: &str = "memory allocated during a capture exists only while the \
     graph runs; allocate it before the capture and write it with `assign`, `assign_cast` or \
     `fill`";

/// Why host transfers are refused on a capturing stream.
pub(crate) const HOST_TRANSFER: &str = "a host transfer stages its data through page-locked \
     memory and waits for the device on the host";

/// Whether an operation's stream is capturing, asked of the driver at most once per operation,
/// and only when one of its operands needs the answer (memory whose accesses devspan orders
/// with events).
pub(crate) struct CaptureCheck<'s> {
    stream: &'s CudaStream,
    capturing: Option<bool>,
}

impl<'s> CaptureCheck<'s> {
    pub(crate) fn new(stream: &'s CudaStream) -> Self {
        CaptureCheck {
            stream,
            capturing: None,
        }
    }

    /// [`is_capturing`] of the operation's stream, asked once.
    pub(crate) fn capturing(&mut self) -> Result<bool> {
        if let Some(c) = self.capturing {
            return Ok(c);
        }
        let c = is_capturing(self.stream)?;
        self.capturing = Some(c);
        Ok(c)
    }
}

/// The calling thread's stream capture mode switched to relaxed until dropped, then restored
/// (`cuThreadExchangeStreamCaptureMode`): under it the thread may make the "potentially unsafe"
/// calls (event and stream queries, host waits, module loads) that the global and thread-local
/// modes forbid during a capture, and that would otherwise fail and invalidate it.
pub(crate) struct RelaxedMode(CUstreamCaptureMode);

impl RelaxedMode {
    /// Switches the calling thread to the relaxed mode. Only called once the driver is loaded
    /// (a context has been made current).
    pub(crate) fn enter() -> Result<Self> {
        driver::exchange_capture_mode(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .map(RelaxedMode)
    }
}

impl Drop for RelaxedMode {
    fn drop(&mut self) {
        // Restores the mode `enter` replaced.
        let _ = driver::exchange_capture_mode(self.0);
    }
}

/// The error of an operation refused because an earlier access of its memory is still running.
pub(crate) fn pending(write: bool) -> Error {
    Error::capture(format!(
        "the stream is capturing a CUDA graph, and earlier work on the memory this operation {} \
         has not completed: a capture cannot wait for work outside it. Wait for that work (for \
         example synchronize its stream) before beginning the capture; nothing was enqueued \
         and the capture is still usable",
        if write { "writes" } else { "reads" }
    ))
}

/// What a probe stream's state says about the waits issued on it.
enum ProbeState {
    /// Not capturing, every wait satisfied.
    Idle,
    /// Not capturing, some wait pending.
    Waiting,
    /// Pulled into a capture (it waited on an event recorded inside one).
    Captured,
    /// Pulled into a capture that has been invalidated.
    Invalidated,
}

/// A stream devspan keeps for itself: cudarc's waits for an allocation's events are issued on
/// it during a capture, so that the capturing stream issues none. Handed out only while it is
/// not capturing and has no pending wait.
pub(crate) struct Probe {
    /// A wrapper (`wrap_borrowed_stream`) of a stream this probe created and destroys.
    stream: Arc<CudaStream>,
    /// The event recorded on the probe when it was pulled into a capture, which the capturing
    /// stream waited on; kept until the probe is used again.
    join: Option<CudaEvent>,
}

impl Probe {
    /// A new probe of `ctx`, which is current on this thread. The stream is created directly,
    /// not through cudarc's `new_stream`, which synchronises the context when it makes the
    /// context's first stream (invalid while a stream of it captures).
    fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let cu_stream = driver::create_stream()?;
        // SAFETY: 1. `cu_stream` is a live stream of `ctx` (current on this thread when it was
        // created); 2. it stays alive until the probe's drop destroys it, after the wrapper's
        // last use (the probe holds the only handle on the wrapper); 3. only devspan uses it.
        let stream = unsafe { ctx.wrap_borrowed_stream(cu_stream) };
        Ok(Probe { stream, join: None })
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = crate::device::bind_context(self.stream.context());
        // SAFETY: the stream was created by `Probe::new` and is destroyed once, here; a stream
        // destroyed with pending waits is released once they complete. Probes in a capture are
        // never dropped (they are kept until it ends).
        let _ = unsafe { driver::destroy_stream(self.stream.cu_stream()) };
    }
}

/// How many idle probes are kept per context (probes in a capture are always kept until it
/// ends).
const KEPT_PROBES: usize = 8;

/// The state of a probe stream. The calling thread is in the relaxed capture mode.
fn probe_state(probe: &CudaStream) -> Result<ProbeState> {
    use CUstreamCaptureStatus::*;
    // SAFETY: the probe is a live stream of the context current on this thread (bound by the
    // caller).
    match unsafe { driver::capture_status(probe.cu_stream()) }? {
        CU_STREAM_CAPTURE_STATUS_ACTIVE => return Ok(ProbeState::Captured),
        CU_STREAM_CAPTURE_STATUS_INVALIDATED => return Ok(ProbeState::Invalidated),
        CU_STREAM_CAPTURE_STATUS_NONE => {}
    }
    // SAFETY: as above; the stream is not capturing, so querying it is allowed.
    if unsafe { driver::stream_idle(probe.cu_stream()) }? {
        Ok(ProbeState::Idle)
    } else {
        Ok(ProbeState::Waiting)
    }
}

/// An idle probe of `ctx` (current on this thread, which is in the relaxed capture mode): a
/// kept one, or a new stream. Kept probes still waiting are let go (a stream destroyed with
/// pending waits is released once they complete); those in a capture are kept until it ends.
fn take_probe(ctx: &Arc<CudaContext>) -> Result<Probe> {
    let rt = runtime::of(ctx);
    let mut pool = runtime::lock(&rt.probes);
    let mut i = 0;
    while i < pool.len() {
        match probe_state(&pool[i].stream) {
            Ok(ProbeState::Idle) => {
                let mut p = pool.swap_remove(i);
                p.join = None;
                return Ok(p);
            }
            Ok(ProbeState::Captured | ProbeState::Invalidated) => i += 1,
            Ok(ProbeState::Waiting) | Err(_) => drop(pool.swap_remove(i)),
        }
    }
    drop(pool);
    Probe::new(ctx)
}

/// Puts a probe back for later use. One that may be in a capture (its state is unknown after
/// an error) is always kept; an idle or waiting one beyond [`KEPT_PROBES`] is let go.
fn give_back(probe: Probe, state: Option<&ProbeState>) {
    let rt = runtime::of(probe.stream.context());
    let mut pool = runtime::lock(&rt.probes);
    let outside_capture = matches!(state, Some(ProbeState::Idle | ProbeState::Waiting));
    if !outside_capture || pool.len() < KEPT_PROBES {
        pool.push(probe);
    }
}

/// How long a probe's waits may take to retire before their accesses count as still running.
const SETTLE: Duration = Duration::from_millis(5);

/// What the waits issued on a probe found.
enum Probed {
    /// Every access waited for has completed.
    Completed,
    /// Some access waited for is still running.
    Running,
    /// The accesses were captured into the capture `stream` is in: `stream` now waits for them
    /// inside the graph.
    Captured,
}

/// Runs `wait`, which issues cudarc's waits for a cudarc allocation's events (its
/// `device_ptr(_mut)`) on the stream it is given and records nothing, on a probe instead of
/// `stream`, which is capturing a graph; then says what the probe found. Accesses captured
/// inside a capture pull the probe into it: `stream` then waits on the probe, which orders it
/// after them in the graph and joins the probe back (an error when `stream` is in another
/// capture than theirs). Nothing is enqueued on `stream` otherwise.
fn on_probe<R>(
    stream: &CudaStream,
    wait: impl FnOnce(&CudaStream) -> Result<R>,
) -> Result<(R, Probed)> {
    let ctx = stream.context();
    ctx.bind_to_thread()?;
    let _relaxed = RelaxedMode::enter()?;
    let mut probe = take_probe(ctx)?;
    let mut state = None;
    let r = (|| {
        let r = wait(&probe.stream)?;
        // cudarc keeps the error of a failed wait in the context instead of returning it; a
        // wait that failed was not issued.
        ctx.check_err()?;
        // A wait on an event that has completed can sit in the probe's queue for a moment
        // before the device retires it.
        let deadline = Instant::now() + SETTLE;
        let mut found = probe_state(&probe.stream)?;
        while matches!(found, ProbeState::Waiting) && Instant::now() < deadline {
            std::thread::yield_now();
            found = probe_state(&probe.stream)?;
        }
        let probed = match state.insert(found) {
            ProbeState::Idle => Probed::Completed,
            ProbeState::Waiting => Probed::Running,
            ProbeState::Captured => {
                let join = ctx.new_event(None)?;
                join.record(&probe.stream)?;
                stream.wait(&join).map_err(|e| {
                    Error::new(
                        crate::ErrorKind::Driver(e),
                        "the memory's latest access was captured into a graph capture that \
                         this stream cannot wait on (another capture's)",
                    )
                })?;
                probe.join = Some(join);
                Probed::Captured
            }
            ProbeState::Invalidated => {
                return Err(Error::capture(
                    "the memory's latest access was captured into a graph capture that has \
                     been invalidated",
                ));
            }
        };
        Ok((r, probed))
    })();
    give_back(probe, state.as_ref());
    r
}

/// For an operation about to be captured on `stream`: checks the earlier accesses of a cudarc
/// allocation that it must follow, with cudarc's waits for them (`wait`, as in [`on_probe`])
/// issued on a probe. `Ok` when they have all completed, or were captured into this capture
/// (the operation's stream then waits for them inside the graph); `Err(StreamCapture)` when
/// some is still running, having enqueued nothing on `stream`.
pub(crate) fn follow_in_capture(
    stream: &CudaStream,
    write: bool,
    wait: impl FnOnce(&CudaStream) -> Result<()>,
) -> Result<()> {
    match on_probe(stream, wait)?.1 {
        Probed::Completed | Probed::Captured => Ok(()),
        Probed::Running => Err(pending(write)),
    }
}

/// The device address of a cudarc slice or view, `s`. cudarc hands it out with its
/// `device_ptr`, which makes the stream given wait on the allocation's last write: that is the
/// allocation's own stream, unless that stream is capturing a graph (a wait there on work
/// outside the capture would invalidate it), when a probe takes the wait. Taking the address
/// enqueues no access: the read event that cudarc would record when its guard drops is skipped.
pub(crate) fn address_of<T, S: DevicePtr<T>>(s: &S) -> u64 {
    let stream = s.stream();
    if stream.context().is_managing_stream_synchronization()
        && !matches!(is_capturing(stream), Ok(false))
    {
        // The address is known once cudarc's wait went to the probe, whatever the probe then
        // finds. A failure before that (an error cudarc kept in the context, reported and
        // cleared by the first try) is tried once more.
        for _ in 0..2 {
            let mut ptr = None;
            let _ = on_probe(stream, |probe| {
                let (p, record) = s.device_ptr(probe);
                std::mem::forget(record);
                ptr = Some(p);
                Ok(())
            });
            if let Some(p) = ptr {
                return p;
            }
        }
    }
    let (ptr, record) = s.device_ptr(stream);
    std::mem::forget(record);
    ptr
}

/// A device array's allocation dropped while its stream was capturing a graph, to be freed once
/// the stream no longer captures: cudarc frees an allocation through its stream, after making
/// that stream wait on the allocation's events, which would invalidate the capture.
pub(crate) struct Deferred {
    /// A `Box<CudaSlice<T>>` from `Box::into_raw`, freed by `free`.
    slice: *mut (),
    /// `free_slice::<T>`.
    free: unsafe fn(*mut ()),
    stream: Arc<CudaStream>,
}

// SAFETY: `slice` owns a `CudaSlice<T>`, which is `Send` for every `T`; nothing else refers to
// it.
unsafe impl Send for Deferred {}

/// Drops a `Box<CudaSlice<T>>` given as a raw pointer.
///
/// # Safety
/// `p` comes from `Box::into_raw` of a `Box<CudaSlice<T>>` and is not used again.
unsafe fn free_slice<T>(p: *mut ()) {
    // SAFETY: the function's contract.
    drop(unsafe { Box::from_raw(p.cast::<CudaSlice<T>>()) });
}

/// How many deferred frees the runtimes hold in all: read without a lock on every drop.
static DEFERRED: AtomicUsize = AtomicUsize::new(0);

/// Drops the allocation of a device array (`slice`, from `Box::into_raw`), with its context
/// current: now, freed by cudarc stream-ordered on its stream, unless that stream is capturing a
/// graph (or the driver cannot say); then once it no longer is, at a later drop or allocation of
/// a device array ([`free_deferred`]).
///
/// # Safety
/// `slice` comes from `Box::into_raw` of a `Box<CudaSlice<T>>` and is not used again.
pub(crate) unsafe fn drop_slice<T>(slice: *mut CudaSlice<T>) {
    free_deferred();
    // SAFETY: `slice` is live until it is dropped below or by `free_deferred` (contract).
    let stream = unsafe { &*slice }.stream().clone();
    let _ = crate::device::bind_context(stream.context());
    if matches!(is_capturing(&stream), Ok(false)) {
        // SAFETY: the contract; dropped once, here.
        drop(unsafe { Box::from_raw(slice) });
        return;
    }
    let rt = runtime::of(stream.context());
    let mut deferred = runtime::lock(&rt.deferred);
    deferred.push(Deferred {
        slice: slice.cast(),
        free: free_slice::<T>,
        stream,
    });
    // Counted under the list's lock, as the drains are: the count never runs below the entries.
    DEFERRED.fetch_add(1, Ordering::AcqRel);
}

/// Frees the deferred allocations ([`drop_slice`]) whose streams no longer capture a graph.
/// Changes the calling thread's current context when it frees one.
pub(crate) fn free_deferred() {
    if DEFERRED.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut ready: Vec<Deferred> = Vec::new();
    for rt in runtime::all() {
        let mut deferred = runtime::lock(&rt.deferred);
        if deferred.is_empty() {
            continue;
        }
        let (now, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut *deferred)
            .into_iter()
            .partition(|d| matches!(is_capturing(&d.stream), Ok(false)));
        *deferred = waiting;
        DEFERRED.fetch_sub(now.len(), Ordering::AcqRel);
        ready.extend(now);
    }
    for d in ready {
        let _ = crate::device::bind_context(d.stream.context());
        // SAFETY: `d.slice` and `d.free` were paired by `drop_slice`; each entry is freed once,
        // having been taken out of the list.
        unsafe { (d.free)(d.slice) };
    }
}
