//! Contexts, framework stream handles and the events that order work between them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once, Weak};

use devspan::cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use pyo3::PyResult;
use pyo3::exceptions::PyValueError;

use super::to_py;
pub(crate) use devspan::foreign::ContextGuard;
use devspan::foreign::SharedOwner;

/// The primary context of `device`, one `CudaContext` per device for the life of the process
/// (frameworks such as PyTorch and CuPy use the same primary contexts).
///
/// The calling thread's current context is the same after the call as before it, also on the
/// call that creates the context.
pub(crate) fn context(device: usize) -> PyResult<Arc<CudaContext>> {
    static CONTEXTS: Mutex<Vec<Option<Arc<CudaContext>>>> = Mutex::new(Vec::new());
    let mut all = CONTEXTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(Some(ctx)) = all.get(device) {
        return Ok(ctx.clone());
    }
    let ctx = create_context(device)?;
    if all.len() <= device {
        all.resize(device + 1, None);
    }
    all[device] = Some(ctx.clone());
    Ok(ctx)
}

/// A new `CudaContext` over the primary context of `device`. Creating one makes it current on
/// the calling thread; the previous current context (or none) is restored before returning.
fn create_context(device: usize) -> PyResult<Arc<CudaContext>> {
    let _current = ContextGuard::save();
    devspan::context(device).map_err(to_py)
}

/// The stream that a Python stream value names on `ctx`'s device.
///
/// `0` and `1` are the legacy default stream, `2` the per-thread default stream, and anything
/// larger a `CUstream` handle (`torch.cuda.Stream.cuda_stream`, `cupy.cuda.Stream.ptr`), which
/// must belong to the same context. Negative values, and values that cannot be the address of
/// a stream (below 4096 or not 8-byte aligned), are refused (`ValueError`). Any other value is
/// trusted to be a live stream: the driver dereferences the handle, so a dangling or made-up one
/// is undefined behaviour, as it is for the frameworks' own external-stream wrappers.
pub(crate) fn stream(ctx: &Arc<CudaContext>, handle: i64) -> PyResult<Arc<CudaStream>> {
    stream_of(ctx, handle).map_err(PyValueError::new_err)
}

/// Whether `handle` can name a stream at all: `0`, `1`, `2`, or a positive 8-byte aligned
/// value of at least 4096. `Err` holds the reason.
pub(crate) fn check_stream_value(handle: i64) -> Result<(), String> {
    match handle {
        0..=2 => Ok(()),
        h if h > 2 && (h < 4096 || h % 8 != 0) => Err(format!(
            "stream {h} (0x{h:x}) cannot be a CUstream handle: use None, 1 (legacy default), 2 \
             (per-thread default) or a live stream's handle"
        )),
        h if h > 2 => Ok(()),
        h => Err(format!(
            "stream {h} is not a CUDA stream: use None, 1 (legacy default), 2 (per-thread default) or a CUstream handle"
        )),
    }
}

/// The driver's name for the error of a failed driver call (`CUDA_ERROR_INVALID_HANDLE`).
fn driver_code(e: &devspan::Error) -> String {
    match e.kind() {
        devspan::ErrorKind::Driver(d) => format!("{:?}", d.0),
        kind => format!("{kind:?}"),
    }
}

/// [`stream`] with the reason for a refusal as a message.
pub(crate) fn stream_of(ctx: &Arc<CudaContext>, handle: i64) -> Result<Arc<CudaStream>, String> {
    check_stream_value(handle)?;
    match handle {
        0 | 1 => Ok(ctx.default_stream()),
        2 => Ok(ctx.per_thread_stream()),
        h => {
            let cu_stream = h as usize as devspan::cudarc::driver::sys::CUstream;
            // SAFETY: 1. the handle is trusted to be a live `CUstream` (the documented contract
            // of the Python API; the driver dereferences it); 2. the wrapper is used during the
            // call that made it, or kept in a [`Link`] only while the object that keeps the
            // stream alive is held (a CUDA Array Interface producer keeps its exported stream
            // alive as long as itself), or in the log of an owner, which only compares its
            // handle with other streams' and never queues work on it; events recorded on it
            // outlive it harmlessly; 3. ordering with the stream owner's work is what the caller
            // asked for by naming the stream.
            unsafe { devspan::foreign::borrow_stream(ctx, cu_stream) }.map_err(|e| match e.kind() {
                devspan::ErrorKind::Driver(_) => format!(
                    "stream 0x{h:x} is not a CUDA stream the driver knows ({})",
                    driver_code(&e)
                ),
                _ => e.message().to_string(),
            })
        }
    }
}

/// A new non-blocking stream of `ctx`, owned by the returned [`Link`] (destroyed when the link
/// is dropped). The caller holds a [`ContextGuard`].
fn create_stream(ctx: &Arc<CudaContext>) -> PyResult<Link> {
    // Not `CudaContext::new_stream`, which synchronises the whole context when it makes its
    // first stream. The `Link` made here is the stream's only holder and destroys it when
    // dropped, after every use of the wrapper.
    let stream = devspan::foreign::create_stream(ctx).map_err(to_py)?;
    Ok(Link {
        stream,
        created: true,
    })
}

/// The CUDA device whose memory `ptr` addresses (`CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`). A null
/// pointer (an empty array's) addresses nothing: it gets the device of the thread's current
/// context, or device 0. `Err(NoDevice)` without a usable driver, `Err(DeviceMismatch)` for an
/// address the driver does not know as CUDA-accessible memory.
pub(crate) fn pointer_device(ptr: u64) -> PyResult<usize> {
    devspan::device_count().map_err(to_py)?;
    if ptr == 0 {
        // The driver is loaded and initialised (`device_count` succeeded).
        return Ok(devspan::foreign::current_device().unwrap_or(0));
    }
    devspan::foreign::pointer_device(ptr).map_err(|e| match e.kind() {
        devspan::ErrorKind::Driver(_) => to_py(devspan::Error::new(
            devspan::ErrorKind::DeviceMismatch,
            format!(
                "address 0x{ptr:x} is not memory that the CUDA driver knows ({}): a CUDA Array \
                 Interface must describe device-accessible memory",
                driver_code(&e)
            ),
        )),
        _ => to_py(e),
    })
}

/// The streams of other libraries that work on a tensor's memory too ([`Link`]), kept in step
/// with devspan's work on it. (devspan's own work on the memory is ordered by the log of the
/// tensor's owner, as for every view.)
///
/// Dropping it destroys the streams devspan created, which makes their context current:
/// callers hold a [`ContextGuard`] while they do.
#[derive(Default)]
pub(crate) struct Links {
    links: Vec<Link>,
}

/// A stream on which another library works on a tensor's memory, kept in step with devspan:
/// each devspan operation on the memory first waits for the work queued on the stream so far,
/// and the stream then waits for the operation.
///
/// Two kinds: the stream named by an imported `__cuda_array_interface__` (the producer's, kept
/// alive by the producer, which the tensor holds), and the stream devspan creates for a
/// tensor's own `__cuda_array_interface__` (its consumers synchronise on it or queue their work
/// there; `created`). A created stream is destroyed with the link, and the tensor's memory is
/// released only after the work queued on it.
pub(crate) struct Link {
    stream: Arc<CudaStream>,
    created: bool,
}

impl Drop for Link {
    fn drop(&mut self) {
        if !self.created {
            return;
        }
        let _current = ContextGuard::save();
        // SAFETY: the stream was created by `create_stream` and this link is its only holder;
        // the driver releases its resources once the work queued on it completes.
        let _ = unsafe { devspan::foreign::destroy_stream(&self.stream) };
    }
}

/// Whether `a` and `b` are one stream: the same handle in the same context (the legacy and
/// per-thread default streams have one handle in every context).
fn same(a: &CudaStream, b: &CudaStream) -> bool {
    a.cu_stream() == b.cu_stream() && a.context().cu_ctx() == b.context().cu_ctx()
}

impl Links {
    /// Makes `stream` wait for the work queued so far on every linked stream.
    pub(crate) fn order_before(&self, stream: &CudaStream) -> PyResult<()> {
        for l in self.links.iter().filter(|l| !same(&l.stream, stream)) {
            stream.join(&l.stream).map_err(|e| to_py(e.into()))?;
        }
        Ok(())
    }

    /// Whether streams are linked.
    pub(crate) fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Makes every linked stream other than `stream` wait for `done`, recorded on `stream`.
    pub(crate) fn hold(&self, stream: &CudaStream, done: &CudaEvent) -> PyResult<()> {
        for l in self.links.iter().filter(|l| !same(&l.stream, stream)) {
            l.stream.wait(done).map_err(|e| to_py(e.into()))?;
        }
        Ok(())
    }

    /// Links a producer's stream (see [`Link`]); linking a stream twice links it once.
    pub(crate) fn link(&mut self, stream: Arc<CudaStream>) {
        if !self.links.iter().any(|l| same(&l.stream, &stream)) {
            self.links.push(Link {
                stream,
                created: false,
            });
        }
    }

    /// The stream that consumers of the tensor's `__cuda_array_interface__` synchronise on,
    /// created (and linked) on first use. The caller holds a [`ContextGuard`].
    pub(crate) fn consumer_stream(&mut self, ctx: &Arc<CudaContext>) -> PyResult<Arc<CudaStream>> {
        if let Some(l) = self.links.iter().find(|l| l.created) {
            return Ok(l.stream.clone());
        }
        let link = create_stream(ctx)?;
        let stream = link.stream.clone();
        self.links.push(link);
        Ok(stream)
    }

    /// The streams devspan created for consumers.
    pub(crate) fn created(&self) -> impl Iterator<Item = &Arc<CudaStream>> {
        self.links.iter().filter(|l| l.created).map(|l| &l.stream)
    }
}

/// Locks a tensor's links (a poisoned lock still holds a consistent list).
pub(crate) fn lock(links: &Mutex<Links>) -> MutexGuard<'_, Links> {
    links.lock().unwrap_or_else(|p| p.into_inner())
}

/// Blocks until `stream` has finished its work; a failure is retried once (cudarc first
/// reports, and clears, an error stored in the context).
pub(crate) fn synchronize(stream: &CudaStream) -> PyResult<()> {
    stream
        .synchronize()
        .or_else(|_| stream.synchronize())
        .map_err(|e| to_py(e.into()))
}

/// The tensors imported for one call, released without making the call wait for its work: the
/// keep-alive of each, whose owner's log records devspan's work on it. An owner shared by the
/// imports of one PyTorch storage ([`STORAGES`]) is listed once, at the place of its latest
/// call.
///
/// The call leaves its tensors here. Once [`REAP_BATCH`] tensors wait, each devspan call first
/// releases those whose work is known to have completed, asking the driver about one recent
/// tensor's work ([`REAP_LAG`] from the newest): seen complete, it shows the work queued before
/// it on its stream complete too, so that one query releases most of the list. Where it has not
/// completed, the oldest is asked about instead. A thread of devspan's looks at the list every
/// 10 ms while some are left: when calls were made in that time it has the next call reap
/// whatever waits, batch or not; when none were, it releases those whose work has completed
/// itself. Either way the memory goes back within about that time, also when no further call
/// comes. Until then a tensor's owner stays listed in [`TENSORS`], so later work on overlapping
/// memory is still ordered after it. More than [`RELEASES_KEPT`] tensors waiting: the oldest is
/// waited for on the host (without the GIL), which bounds the memory held back.
pub(crate) struct Releases {
    /// The waiting owners, the least recently deferred first; an owner is listed once.
    list: Mutex<Vec<Arc<SharedOwner>>>,
    /// How many calls have asked to [`reap`](Self::reap): while it moves, the release thread
    /// leaves the reaping to the calls.
    calls: AtomicU64,
    /// Set by the release thread when it found tensors waiting while calls were being made:
    /// the next call reaps whatever the list holds, not only a full batch.
    due: AtomicBool,
    wake: Condvar,
    reaper: Once,
    /// Set at interpreter exit ([`shut_down`](Self::shut_down)): the thread attaches no more.
    stop: AtomicBool,
    /// Whether the thread is attaching to Python (or attached).
    attaching: AtomicBool,
}

/// How many tensors [`Releases`] holds before a new one makes the host wait.
const RELEASES_KEPT: usize = 256;

/// How many tensors wait before a call asks the driver about them.
const REAP_BATCH: usize = 8;

/// How many of the newest tensors a call's query passes over: the work of the last calls may
/// still run, that of a few calls back has most likely completed.
const REAP_LAG: usize = 2;

/// The tensors waiting for their work before going back to their producers.
pub(crate) static RELEASES: Releases = Releases {
    list: Mutex::new(Vec::new()),
    calls: AtomicU64::new(0),
    due: AtomicBool::new(false),
    wake: Condvar::new(),
    reaper: Once::new(),
    stop: AtomicBool::new(false),
    attaching: AtomicBool::new(false),
};

impl Releases {
    fn list(&self) -> MutexGuard<'_, Vec<Arc<SharedOwner>>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Releases `cell` (a tensor's owner) once the work in its log has completed (now, if it
    /// is known to have: the driver is not asked, as the call's own work was just queued).
    pub(crate) fn defer(&'static self, cell: Arc<SharedOwner>) {
        if cell.is_known_settled() {
            let _current = ContextGuard::save();
            drop(cell);
            return;
        }
        if self.stop.load(Ordering::SeqCst) {
            // The interpreter is exiting: no thread releases it later.
            release_after_work(cell);
            return;
        }
        let (was_empty, oldest) = {
            let mut list = self.list();
            let was_empty = list.is_empty();
            // An owner deferred again (one storage imported by several calls) moves to the
            // end: the list stays in the order of the owners' latest work.
            if let Some(i) = list.iter().position(|c| Arc::ptr_eq(c, &cell)) {
                let listed = list.remove(i);
                list.push(listed);
                drop(list);
                // Not the last holder: the list holds the owner.
                drop(cell);
                return;
            }
            list.push(cell);
            (
                was_empty,
                (list.len() > RELEASES_KEPT).then(|| list.remove(0)),
            )
        };
        self.reaper.call_once(|| {
            // Without the thread, the calls still release what they find completed.
            let _ = std::thread::Builder::new()
                .name("devspan-release".into())
                .spawn(move || self.reap_periodically());
        });
        if was_empty {
            // The thread sleeps on `wake` only while the list is empty.
            self.wake.notify_one();
        }
        if let Some(cell) = oldest {
            release_after_work(cell);
        }
    }

    /// Once [`REAP_BATCH`] tensors wait, releases those whose work has completed, asking the
    /// driver about at most two events (the rest is left to later calls and to the release
    /// thread). The caller is attached to Python.
    pub(crate) fn reap(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let batch = if self.due.swap(false, Ordering::Relaxed) {
            1
        } else {
            REAP_BATCH
        };
        self.reap_asking(2, batch);
    }

    /// Releases the tensors whose work has completed when at least `batch` (1 or more) wait,
    /// asking the driver about at most `queries` events: first the work of the tensor
    /// [`REAP_LAG`] from the newest, then the oldest work not known complete.
    fn reap_asking(&self, mut queries: usize, batch: usize) {
        let done: Vec<Arc<SharedOwner>> = {
            let mut list = self.list();
            if list.len() < batch.max(1) {
                return;
            }
            let probe = list.len().saturating_sub(REAP_LAG + 1);
            // Seen complete, it makes every earlier fence of its streams known complete; a
            // call then asks about nothing newer (the release thread, with `batch` 1, does).
            if list[probe].is_settled_asking(&mut queries) && batch > 1 {
                queries = 0;
            }
            let (done, left) = std::mem::take(&mut *list)
                .into_iter()
                .partition(|c| c.is_settled_asking(&mut queries));
            *list = left;
            done
        };
        if !done.is_empty() {
            let _current = ContextGuard::save();
            drop(done);
        }
    }

    /// The release thread: while tensors wait, every 10 ms, releases those whose work has
    /// completed (attached to Python, which some producers' deleters need). While calls are
    /// being made it leaves that to the next call ([`due`](Self::due)) rather than wait for the
    /// interpreter, which a busy caller holds: a thread waiting for it makes every release of
    /// it by the caller (PyTorch releases it inside many of its methods) wake the waiter. It
    /// stops when the interpreter can no longer be attached to.
    fn reap_periodically(&self) {
        loop {
            {
                let mut list = self.list();
                while list.is_empty() {
                    list = self.wake.wait(list).unwrap_or_else(|p| p.into_inner());
                }
            }
            let calls = self.calls.load(Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(10));
            if self.calls.load(Ordering::Relaxed) != calls {
                self.due.store(true, Ordering::Relaxed);
                continue;
            }
            if !self.list().iter().any(|c| c.is_settled()) {
                continue;
            }
            // `attaching` is set before `stop` is read, and `shut_down` sets `stop` before it
            // reads `attaching`: the thread never attaches after `shut_down` has returned.
            self.attaching.store(true, Ordering::SeqCst);
            let attached = !self.stop.load(Ordering::SeqCst)
                && pyo3::Python::try_attach(|_| self.reap_asking(usize::MAX, 1)).is_some();
            self.attaching.store(false, Ordering::SeqCst);
            if !attached {
                return;
            }
        }
    }

    /// At interpreter exit (an `atexit` handler, run attached): stops the release thread from
    /// attaching again (a thread that attaches while the interpreter finalizes may be ended
    /// mid-call), lets one that waits for the GIL finish, and releases what is still held, after
    /// its work.
    pub(crate) fn shut_down(&self, py: pyo3::Python<'_>) {
        self.stop.store(true, Ordering::SeqCst);
        py.detach(|| {
            let start = std::time::Instant::now();
            while self.attaching.load(Ordering::SeqCst)
                && start.elapsed() < std::time::Duration::from_secs(1)
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        for cell in std::mem::take(&mut *self.list()) {
            release_after_work(cell);
        }
    }
}

/// Releases `cell` now, once the host has waited (without the GIL) for the work in its log.
fn release_after_work(cell: Arc<SharedOwner>) {
    let _current = ContextGuard::save();
    pyo3::Python::attach(|py| py.detach(|| cell.wait_host()));
    drop(cell);
}

/// `result`, the outcome of queuing work on a stream, returned only once that work is accounted
/// for, whether it failed or not: `record` notes it for later users (records CUDA events), and
/// where that fails, or the work itself failed (and may be missing from the owner's log),
/// `synchronize` waits for it. The first error is the one returned.
pub(crate) fn settle<R, E>(
    result: Result<R, E>,
    record: impl FnOnce() -> Result<(), E>,
    synchronize: impl FnOnce() -> Result<(), E>,
) -> Result<R, E> {
    // On a recording error the synchronisation's own error is dropped: the first is reported.
    // Work that failed part way may not be in the owner's log: it is waited for as well.
    let accounted = record();
    if result.is_err() || accounted.is_err() {
        let _ = synchronize();
    }
    let out = result?;
    accounted.map(|()| out)
}

/// Device memory that a devspan tensor spans: bytes `start..end` on CUDA device `device`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    pub(crate) device: usize,
    pub(crate) start: u64,
    pub(crate) end: u64,
}

impl Region {
    /// Whether some byte lies in both (empty regions overlap nothing).
    fn overlaps(&self, other: &Region) -> bool {
        self.device == other.device && self.start.max(other.start) < self.end.min(other.end)
    }
}

/// Items (the owners of live devspan tensors, or their links) by the memory they describe,
/// so that work on one tensor can be ordered after devspan's work on every other tensor over
/// overlapping memory: the same producer tensor imported twice, or an export imported again.
///
/// Entries are weak: an entry is forgotten once nothing else holds its item. Overlap is
/// decided on whole spans, so views that share an allocation but no element may be ordered
/// needlessly, never the other way round.
pub(crate) struct Users<T> {
    entries: Mutex<Vec<(Region, Weak<T>)>>,
}

impl<T> Users<T> {
    pub(crate) const fn new() -> Self {
        Users {
            entries: Mutex::new(Vec::new()),
        }
    }

    fn entries(&self) -> MutexGuard<'_, Vec<(Region, Weak<T>)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `item` as a user of `region`, forgetting entries whose items are gone.
    pub(crate) fn register(&self, region: Region, item: &Arc<T>) {
        let mut entries = self.entries();
        entries.retain(|(_, w)| w.strong_count() > 0);
        entries.push((region, Arc::downgrade(item)));
    }

    /// The live items whose regions overlap `region`.
    pub(crate) fn overlapping(&self, region: Region) -> Vec<Arc<T>> {
        self.entries()
            .iter()
            .filter(|(r, _)| r.overlaps(&region))
            .filter_map(|(_, w)| w.upgrade())
            .collect()
    }
}

/// The owners of all live devspan tensors (and of their exports and of tensors still waiting
/// in [`RELEASES`]), whose logs record devspan's work on their memory.
pub(crate) static TENSORS: Users<SharedOwner> = Users::new();

/// The owners of the PyTorch storages imported for calls, by the address of the storage's
/// Python object and the memory the imported layout spans, so that the same tensor imported by
/// later calls while its owner lives (in a loop, the owner waits in [`RELEASES`] for the work
/// of its last call) gets the same owner, listed once in [`TENSORS`], rather than one owner per
/// call.
///
/// Entries are weak: while one yields its owner, the owner holds the storage object, so that
/// no other object can have its address. A storage object that PyTorch makes anew for every
/// `untyped_storage()` call (releases without Python object preservation) is never found, and
/// gets an owner per call.
pub(crate) struct Storages {
    entries: Mutex<Vec<(usize, Region, Weak<SharedOwner>)>>,
}

/// How many storages [`STORAGES`] remembers (the most recently imported).
const STORAGES_KEPT: usize = 64;

impl Storages {
    fn entries(&self) -> MutexGuard<'_, Vec<(usize, Region, Weak<SharedOwner>)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live owner of storage object `storage` imported over `region`, if any.
    pub(crate) fn find(&self, storage: usize, region: Region) -> Option<Arc<SharedOwner>> {
        self.entries()
            .iter()
            .find(|(s, r, _)| *s == storage && *r == region)
            .and_then(|(_, _, w)| w.upgrade())
    }

    /// Remembers `cell` as the owner of storage object `storage` imported over `region`,
    /// forgetting entries whose owners are gone.
    pub(crate) fn insert(&self, storage: usize, region: Region, cell: &Arc<SharedOwner>) {
        let mut entries = self.entries();
        entries.retain(|(_, _, w)| w.strong_count() > 0);
        if entries.len() >= STORAGES_KEPT {
            entries.remove(0);
        }
        entries.push((storage, region, Arc::downgrade(cell)));
    }
}

/// See [`Storages`].
pub(crate) static STORAGES: Storages = Storages {
    entries: Mutex::new(Vec::new()),
};

/// The links of the live devspan tensors that have any.
pub(crate) static LINKED: Users<Mutex<Links>> = Users::new();

/// Run with `cargo test -p devspan-python --no-default-features` (the test binary links libpython). The
/// `#[ignore]`d tests need a CUDA GPU (`--include-ignored`, as the GPU runner does).
#[cfg(test)]
mod tests {
    use pyo3::Python;

    use super::*;

    /// Runs `f` on a new thread, which starts with no current context, attached to Python.
    fn on_fresh_thread(f: impl FnOnce() + Send) {
        std::thread::scope(|s| {
            s.spawn(|| Python::attach(|_| f()))
                .join()
                .expect("the test thread panicked")
        });
    }

    #[test]
    fn users_lists_the_live_items_over_overlapping_memory() {
        let users = Users::<u32>::new();
        let at = |device, start, end| Region { device, start, end };
        let a = Arc::new(1);
        let b = Arc::new(2);
        let c = Arc::new(3);
        users.register(at(0, 0x1000, 0x2000), &a);
        users.register(at(0, 0x1800, 0x2800), &b);
        users.register(at(1, 0x1000, 0x2000), &c);
        let found = |r| {
            let mut v: Vec<u32> = users.overlapping(r).iter().map(|x| **x).collect();
            v.sort();
            v
        };
        assert_eq!(found(at(0, 0x1000, 0x2000)), [1, 2]);
        assert_eq!(
            found(at(0, 0x0000, 0x1000)),
            [] as [u32; 0],
            "touching is not overlapping"
        );
        assert_eq!(found(at(0, 0x2000, 0x2001)), [2]);
        assert_eq!(found(at(1, 0x1fff, 0x3000)), [3], "devices are told apart");
        assert_eq!(
            found(at(0, 0x1900, 0x1900)),
            [] as [u32; 0],
            "empty spans reach nothing"
        );
        drop(b);
        assert_eq!(
            found(at(0, 0x1000, 0x2800)),
            [1],
            "gone items are not listed"
        );
        let d = Arc::new(4);
        users.register(at(2, 0, 8), &d);
        assert_eq!(users.entries().len(), 3, "registering forgets gone items");
    }

    #[test]
    fn storages_gives_back_the_live_owner_of_one_storage_over_one_region() {
        struct Owner;
        impl devspan::DeviceOwner for Owner {}
        let storages = Storages {
            entries: Mutex::new(Vec::new()),
        };
        let at = |start, end| Region {
            device: 0,
            start,
            end,
        };
        let a = SharedOwner::new(Arc::new(Owner));
        storages.insert(0x10, at(0x1000, 0x2000), &a);
        let found = storages.find(0x10, at(0x1000, 0x2000));
        assert!(found.is_some_and(|f| Arc::ptr_eq(&f, &a)));
        assert!(
            storages.find(0x10, at(0x1000, 0x1800)).is_none(),
            "another region of the storage has its own owner"
        );
        assert!(
            storages.find(0x20, at(0x1000, 0x2000)).is_none(),
            "another storage object over the same memory has its own owner"
        );
        assert!(
            storages
                .find(
                    0x10,
                    Region {
                        device: 1,
                        ..at(0x1000, 0x2000)
                    }
                )
                .is_none()
        );
        drop(a);
        assert!(
            storages.find(0x10, at(0x1000, 0x2000)).is_none(),
            "a gone owner is not given back"
        );
        let kept: Vec<_> = (0..STORAGES_KEPT + 1)
            .map(|i| {
                let o = SharedOwner::new(Arc::new(Owner));
                storages.insert(0x100 + i, at(0, 8), &o);
                o
            })
            .collect();
        assert_eq!(
            storages.entries().len(),
            STORAGES_KEPT,
            "gone and oldest forgotten"
        );
        assert!(storages.find(0x100, at(0, 8)).is_none());
        assert!(storages.find(0x100 + STORAGES_KEPT, at(0, 8)).is_some());
        drop(kept);
    }

    #[test]
    fn settle_accounts_for_the_work_on_every_path() {
        use std::cell::Cell;
        let (records, syncs) = (Cell::new(0), Cell::new(0));
        let record = |ok: bool| {
            let records = &records;
            move || {
                records.set(records.get() + 1);
                if ok { Ok(()) } else { Err("record") }
            }
        };
        let sync = || {
            syncs.set(syncs.get() + 1);
            Err::<(), _>("sync")
        };
        assert_eq!(settle(Ok(7), record(true), sync), Ok(7));
        assert_eq!((records.get(), syncs.get()), (1, 0));
        // A failed launch is still recorded (part of it may have been queued), and waited for.
        assert_eq!(
            settle(Err::<u8, _>("launch"), record(true), sync),
            Err("launch")
        );
        assert_eq!((records.get(), syncs.get()), (2, 1));
        // No event: the stream is synchronised once, and the first error is reported.
        assert_eq!(
            settle(Err::<u8, _>("launch"), record(false), sync),
            Err("launch")
        );
        assert_eq!((records.get(), syncs.get()), (3, 2));
        assert_eq!(settle(Ok(7), record(false), sync), Err("record"));
        assert_eq!((records.get(), syncs.get()), (4, 3));
    }

    #[test]
    fn contexts_and_saved_contexts_need_no_driver() {
        Python::initialize();
        Python::attach(|_| {
            let saved = ContextGuard::save();
            let ctx = context(0);
            drop(saved);
            assert_eq!(ctx.is_ok(), devspan::gpu_available());
        });
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn creating_a_context_keeps_the_current_context() {
        Python::initialize();
        let ctx = Python::attach(|_| context(0).expect("a CUDA device"));
        on_fresh_thread(|| {
            // Not the cached context: a new `CudaContext`, which binds on creation.
            drop(create_context(0).expect("a CUDA device"));
            assert!(
                devspan::foreign::current_device().is_err(),
                "a context was left current"
            );
            devspan::foreign::bind_context(&ctx).expect("bind");
            drop(create_context(0).expect("a CUDA device"));
            assert_eq!(devspan::foreign::current_device().ok(), Some(0));
        });
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn dropping_an_allocation_frees_it_in_its_own_context() {
        Python::initialize();
        Python::attach(|py| {
            let ctx = context(0).expect("a CUDA device");
            let home = ctx.default_stream();
            let side = ctx.per_thread_stream();
            let a =
                devspan::DeviceArray::<f32, _>::zeros(&home, devspan::ndarray::IxDyn(&[1 << 20]))
                    .expect("allocation");
            let t = crate::Tensor::owned(a).expect("tensor");
            let mut v = t.view_mut::<f32>().expect("view");
            t.before(&side, true).expect("order");
            v.fill_on(&side, 1.0).expect("fill");
            t.after(&side).expect("record");
            drop(v);
            py.detach(|| {
                on_fresh_thread(move || {
                    drop(t);
                    assert!(
                        devspan::foreign::current_device().is_err(),
                        "the context was left current"
                    );
                })
            });
            // A free under no context would have stored an error in the context.
            ctx.check_err().expect("the free succeeded");
            ctx.synchronize().expect("synchronize");
        });
    }
}
