//! The pinned staging pipeline for pageable host memory.
//!
//! The bus buffer is cut into chunks of a few MiB. Worker threads (the calling thread is
//! worker 0) take every `threads`-th chunk; each owns two pinned staging chunks, so while the
//! copy engine moves one chunk the worker packs (upload) or unpacks (download) the other. All
//! copies go on the caller's stream, so they keep its ordering with earlier and later work.
//!
//! A worker that fails (an `Err`) or panics stops the others at their next chunk, and the
//! staging chunks are released only once no copy uses them (see [`run_workers`]).
//! [`StagedDownload`] splits a download into an enqueueing half and a host half, for
//! transfers that must hold no device memory while they wait.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use super::pack::{pack, unpack};
use super::pinned::{PinnedBuffer, give_back_chunks, take_chunks};
use super::plan::{HostAxis, HostPath};
use crate::driver;
use crate::error::{Error, Result};

/// How a host <-> device copy moves pageable host memory: the options of
/// [`copy_from_host_with`](crate::DeviceBase::copy_from_host_with),
/// [`copy_to_host_with`](crate::DeviceBase::copy_to_host_with) and
/// [`from_host_with`](crate::DeviceArray::from_host_with). The forms without `_with` use
/// [`TransferOptions::default()`].
///
/// Pageable host memory crosses the bus through page-locked staging chunks of `chunk_bytes`
/// bytes. `threads` workers (the calling thread is one of them) each own two chunks and pack
/// (upload) or unpack (download) one while the copy engine moves the other. The options change
/// how a transfer runs, never what it writes. Options that fail [`check`](Self::check) make a
/// transfer return `Err` before it touches either side.
///
/// ```
/// use devspan::{HostPath, TransferOptions};
///
/// // One staging thread with 1 MiB chunks; host views that are one block go through staging
/// // too, even when the driver knows them as page-locked.
/// let opt = TransferOptions {
///     chunk_bytes: 1 << 20,
///     threads: 1,
///     pinned_direct: false,
///     ..TransferOptions::default()
/// };
/// assert!(opt.check().is_ok());
/// assert_eq!(opt.host_path, None::<HostPath>);
/// assert!(TransferOptions { threads: 0, ..opt }.check().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferOptions {
    /// Bytes per staging chunk (at least one element's worth is used); nonzero. Default:
    /// 4 MiB.
    pub chunk_bytes: usize,
    /// Worker threads that pack and unpack staging chunks, the calling thread included:
    /// `1..=256`. A transfer starts no more workers than it has chunks. Default: the number of
    /// cores available to the process ([`std::thread::available_parallelism`]), at most 16.
    pub threads: usize,
    /// The host path ([`HostPath`]) to take where it is legal; `None` (the default) lets the
    /// planner choose. A gap-free host view is always copied as one
    /// [`Block`](HostPath::Block); `Some(HostPath::Pack)` makes an upload from a broadcast host
    /// view gather its elements instead of sending the block they span
    /// ([`Superset`](HostPath::Superset)). A block with gaps is never sent, so `Superset` and
    /// `Block` change nothing.
    pub host_path: Option<HostPath>,
    /// Copy straight from and into page-locked host memory (a [`PinnedBuffer`] or memory the
    /// driver knows as page-locked) when the host side is one block, without staging.
    /// Default: `true`.
    pub pinned_direct: bool,
}

impl Default for TransferOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        TransferOptions {
            chunk_bytes: 4 << 20,
            threads: cores.min(16),
            host_path: None,
            pinned_direct: true,
        }
    }
}

impl TransferOptions {
    /// `Err` with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// `chunk_bytes` is zero or `threads` is not in `1..=256`.
    ///
    /// ```
    /// use devspan::{ErrorKind, TransferOptions};
    /// let opt = TransferOptions { chunk_bytes: 0, ..TransferOptions::default() };
    /// assert_eq!(opt.check().unwrap_err().kind(), &ErrorKind::InvalidArgument);
    /// assert!(TransferOptions::default().check().is_ok());
    /// ```
    pub fn check(&self) -> Result<()> {
        if self.chunk_bytes == 0 || self.threads == 0 || self.threads > MAX_THREADS {
            return Err(Error::invalid(format!(
                "staging chunk size ({}) must be nonzero and the thread count ({}) in 1..={MAX_THREADS}",
                self.chunk_bytes, self.threads
            )));
        }
        Ok(())
    }
}

/// Most staging threads a transfer may ask for.
const MAX_THREADS: usize = 256;

/// A host pointer that crosses to the worker threads.
#[derive(Clone, Copy)]
struct HostPtr<T>(*mut T);
// SAFETY: the workers touch disjoint element ranges of the bus buffer, which map to disjoint
// host elements (uploads only read); the pointer's validity is the pipeline's caller's contract.
unsafe impl<T: Send> Send for HostPtr<T> {}
// SAFETY: see `Send`.
unsafe impl<T: Send> Sync for HostPtr<T> {}

impl<T> HostPtr<T> {
    /// The pointer (a method, so that closures capture the whole `HostPtr`).
    fn get(&self) -> *mut T {
        self.0
    }
}

struct Geometry {
    chunk: usize,
    nchunks: usize,
    threads: usize,
}

fn geometry<T>(m: usize, opt: &TransferOptions) -> Result<Geometry> {
    opt.check()?;
    let chunk = (opt.chunk_bytes / std::mem::size_of::<T>()).max(1);
    let nchunks = m.div_ceil(chunk);
    Ok(Geometry {
        chunk,
        nchunks,
        threads: opt.threads.min(nchunks).max(1),
    })
}

/// What became of a run of workers: the first error and the first panic, if any.
struct Outcome {
    err: Option<Error>,
    panic: Option<Box<dyn Any + Send>>,
}

/// Runs `work(w, part, abort)` for every worker `w` in `0..threads` (`w = 0` on this thread),
/// `part` being the `w`-th run of `per` items of `items`, and returns when every worker has
/// returned. The first failure of a worker, an `Err` or a panic, sets `abort`, which the
/// workers check before each chunk, so the others stop at their next chunk. Panics are caught
/// here and handed back in the [`Outcome`] (never re-raised), so the caller can clean up
/// before it resumes them.
fn run_scoped<C, F>(items: &mut [C], per: usize, threads: usize, work: F) -> Outcome
where
    C: Send,
    F: Fn(usize, &mut [C], &AtomicBool) -> Result<()> + Sync,
{
    let abort = AtomicBool::new(false);
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    let first_panic: Mutex<Option<Box<dyn Any + Send>>> = Mutex::new(None);
    let fail_with = |e: Error| {
        abort.store(true, Ordering::Relaxed);
        first_err
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
    };
    let run = |w: usize, c: &mut [C]| {
        // `AssertUnwindSafe`: after a panic, only `abort` (an atomic) and the outcome are
        // looked at here; the items are cleaned up by the caller, which knows what a
        // half-finished worker may have left in flight.
        match std::panic::catch_unwind(AssertUnwindSafe(|| work(w, c, &abort))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => fail_with(e),
            Err(payload) => {
                abort.store(true, Ordering::Relaxed);
                first_panic
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(payload);
            }
        }
    };
    std::thread::scope(|sc| {
        let (mine, mut others) = items.split_at_mut(per.min(items.len()));
        for w in 1..threads {
            let take = per.min(others.len());
            let (c, rest) = std::mem::take(&mut others).split_at_mut(take);
            others = rest;
            let run = &run;
            let spawned = std::thread::Builder::new()
                .name(format!("devspan-staging-{w}"))
                .spawn_scoped(sc, move || run(w, c));
            if let Err(e) = spawned {
                // Worker `w`'s chunks would be skipped: stop everyone and report.
                fail_with(Error::invalid(format!(
                    "could not start a staging thread: {e}"
                )));
                break;
            }
        }
        run(0, mine);
    });
    Outcome {
        err: first_err.into_inner().unwrap_or_else(|p| p.into_inner()),
        panic: first_panic.into_inner().unwrap_or_else(|p| p.into_inner()),
    }
}

/// Runs `work(w, two_chunks, abort)` for every worker, `w = 0` on this thread, and returns
/// the chunks to the pool when every copy that used them has completed.
///
/// On an error or a panic of any worker, the others stop at their next chunk; once all have
/// returned, the stream is synchronised before the chunks go back to the pool (they are leaked,
/// never freed or reused, when that fails, since a copy may still use them). Then the first
/// error is returned, or the first panic is resumed on the calling thread
/// ([`std::panic::resume_unwind`]); a panic wins over an error.
fn run_workers<F>(stream: &Arc<CudaStream>, g: &Geometry, bytes: usize, work: F) -> Result<()>
where
    F: Fn(usize, &mut [PinnedBuffer<u8>], &AtomicBool) -> Result<()> + Sync,
{
    let mut chunks = take_chunks(stream.context(), 2 * g.threads, bytes)?;
    let out = run_scoped(&mut chunks, 2, g.threads, work);
    if out.err.is_none() && out.panic.is_none() {
        // Every worker waited for the events of all its copies.
        give_back_chunks(chunks);
        return Ok(());
    }
    // A failed or unwinding worker may have left copies in flight.
    let synced = stream.synchronize().is_ok();
    if synced {
        give_back_chunks(chunks);
    } else {
        // A copy may still use the chunks: never free or reuse them.
        std::mem::forget(chunks);
    }
    match (out.panic, out.err) {
        (Some(payload), _) => std::panic::resume_unwind(payload),
        (None, Some(e)) => Err(e),
        (None, None) => Ok(()),
    }
}

/// Waits for the events marked `used`; the first error of `r` and the waits.
fn wait_all(ev: &[CudaEvent; 2], used: [bool; 2], r: Result<()>) -> Result<()> {
    let mut r = r;
    for s in 0..2 {
        if used[s] {
            let w = ev[s].synchronize();
            if r.is_ok() {
                r = w.map_err(Into::into);
            }
        }
    }
    r
}

/// A worker's two staging events and which of them have a copy recorded. Leaving a worker
/// without [`finish`](Self::finish) (a panic unwinding through it) sets `abort`, so the other
/// workers stop, and then waits for the recorded copies, so the worker's chunks are idle
/// before [`run_workers`] looks at them.
struct Inflight<'a> {
    ev: [CudaEvent; 2],
    used: [bool; 2],
    abort: &'a AtomicBool,
    finished: bool,
}

impl<'a> Inflight<'a> {
    fn new(ctx: &Arc<CudaContext>, abort: &'a AtomicBool) -> Result<Self> {
        Ok(Inflight {
            ev: [ctx.new_event(None)?, ctx.new_event(None)?],
            used: [false; 2],
            abort,
            finished: false,
        })
    }

    /// Waits for the recorded copies; the first error of `r` and the waits.
    fn finish(mut self, r: Result<()>) -> Result<()> {
        self.finished = true;
        wait_all(&self.ev, self.used, r)
    }
}

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.abort.store(true, Ordering::Relaxed);
        // A failed wait is covered by `run_workers`, which synchronises the stream (or leaks
        // the chunks) before releasing them.
        let _ = wait_all(&self.ev, self.used, Ok(()));
    }
}

/// Copies the bus buffer of `m` elements, gathered from host memory at `host` through `runs`,
/// to the `m` contiguous device elements at `dev`, and waits until the copies have read the
/// staging chunks (not for the device side to be visible to other streams).
///
/// # Panics
/// Resumes the panic of a staging worker (packing is not expected to panic) once the other
/// workers have stopped and no copy uses the staging chunks any longer; see [`run_workers`].
///
/// # Safety
/// The host elements reached by `runs` from `host` (the bus buffer's order) must be readable
/// and not written until this returns; `dev` must be `m` writable device elements in
/// `stream`'s context that nothing else uses until the stream's work completes.
pub(crate) unsafe fn upload<T: Copy + Send>(
    stream: &Arc<CudaStream>,
    host: *const T,
    runs: &[HostAxis],
    m: usize,
    dev: u64,
    opt: &TransferOptions,
) -> Result<()> {
    let g = geometry::<T>(m, opt)?;
    let size = std::mem::size_of::<T>();
    let host = HostPtr(host.cast_mut());
    let ctx = stream.context();
    run_workers(stream, &g, g.chunk * size, |w, chunks, abort| {
        ctx.bind_to_thread()?;
        let mut inf = Inflight::new(ctx, abort)?;
        let mut go = || -> Result<()> {
            for (j, k) in (w..g.nchunks).step_by(g.threads).enumerate() {
                if abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let s = j % 2;
                if inf.used[s] {
                    inf.ev[s].synchronize()?;
                }
                let start = k * g.chunk;
                let len = g.chunk.min(m - start);
                let buf = chunks[s].as_mut_ptr().cast::<T>();
                // SAFETY: elements `start..start + len` of the bus buffer are host elements
                // (caller's contract); the staging chunk holds `chunk >= len` elements of `T`
                // (page-aligned) and its previous copy has completed (event waited above).
                unsafe { pack(host.get().cast_const(), runs, start, buf, len) };
                inf.used[s] = true;
                // SAFETY: the chunk stays alive and unwritten until `ev[s]` completes (waited
                // before reuse, at the end, and by `Inflight`'s drop when unwinding); the
                // destination range lies inside `dev`.
                unsafe {
                    driver::copy_htod(stream, dev + (start * size) as u64, buf.cast_const(), len)?
                };
                inf.ev[s].record(stream)?;
            }
            Ok(())
        };
        let r = go();
        inf.finish(r)
    })
}

/// Copies the `m` contiguous device elements at `dev` into host memory at `host`, scattered
/// through `runs`, and waits for it.
///
/// # Panics
/// As [`upload`], for panics while unpacking; the host elements are then partly written.
///
/// # Safety
/// The host elements reached by `runs` from `host` must be writable and accessed by nothing
/// else until this returns; `dev` must be `m` readable device elements in `stream`'s context
/// whose producing work is ordered before this call on `stream`.
pub(crate) unsafe fn download<T: Copy + Send>(
    stream: &Arc<CudaStream>,
    dev: u64,
    m: usize,
    host: *mut T,
    runs: &[HostAxis],
    opt: &TransferOptions,
) -> Result<()> {
    let g = geometry::<T>(m, opt)?;
    let size = std::mem::size_of::<T>();
    let host = HostPtr(host);
    let ctx = stream.context();
    run_workers(stream, &g, g.chunk * size, |w, chunks, abort| {
        ctx.bind_to_thread()?;
        let mut inf = Inflight::new(ctx, abort)?;
        let mine: Vec<usize> = (w..g.nchunks).step_by(g.threads).collect();
        let bufs = [
            chunks[0].as_mut_ptr().cast::<T>(),
            chunks[1].as_mut_ptr().cast::<T>(),
        ];
        let mut go = || -> Result<()> {
            let issue = |j: usize, used: &mut [bool; 2]| -> Result<()> {
                let s = j % 2;
                let start = mine[j] * g.chunk;
                let len = g.chunk.min(m - start);
                used[s] = true;
                // SAFETY: the staging chunk holds `len` elements, is not read by the host
                // until `ev[s]` completes, and its previous contents were unpacked already;
                // it stays alive until `ev[s]` completes (waited at the end, and by
                // `Inflight`'s drop when unwinding).
                unsafe { driver::copy_dtoh(stream, bufs[s], dev + (start * size) as u64, len)? };
                inf.ev[s].record(stream)?;
                Ok(())
            };
            if !mine.is_empty() {
                issue(0, &mut inf.used)?;
            }
            for j in 0..mine.len() {
                if abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                if j + 1 < mine.len() {
                    issue(j + 1, &mut inf.used)?;
                }
                let s = j % 2;
                inf.ev[s].synchronize()?;
                let start = mine[j] * g.chunk;
                let len = g.chunk.min(m - start);
                // SAFETY: the chunk's copy has completed; the bus range maps to host elements
                // that only this worker writes (caller's contract, disjoint chunk ranges).
                unsafe { unpack(host.get(), runs, start, bufs[s].cast_const(), len) };
            }
            Ok(())
        };
        let r = go();
        inf.finish(r)
    })
}

/// A device -> host copy in two halves: [`start`](Self::start) enqueues copies of contiguous
/// device elements into page-locked staging chunks from the pool, [`finish`](Self::finish)
/// waits for them and scatters the chunks into host memory.
///
/// It holds host-side state only. Dropping it waits for the copies and returns the chunks to
/// the pool (a chunk whose copy cannot be waited for is leaked, never freed or reused);
/// forgetting it leaks the chunks and touches nothing else.
pub(crate) struct StagedDownload<T> {
    chunks: Vec<PinnedBuffer<u8>>,
    /// Elements per chunk (the last one may hold fewer).
    chunk: usize,
    /// Elements in all.
    m: usize,
    /// Threads that unpack the chunks.
    threads: usize,
    _elem: PhantomData<T>,
}

impl<T: Copy + Send> StagedDownload<T> {
    /// Enqueues on `stream` copies of the `m` contiguous device elements at `dev` into
    /// staging chunks of `opt.chunk_bytes` bytes, and returns without waiting.
    ///
    /// # Safety
    /// `dev` must be `m` readable device elements in `stream`'s context whose producers are
    /// ordered before this call on `stream`, and must stay allocated until the copies complete
    /// (a stream-ordered free enqueued on `stream` after this call is fine).
    pub(crate) unsafe fn start(
        stream: &Arc<CudaStream>,
        dev: u64,
        m: usize,
        opt: &TransferOptions,
    ) -> Result<Self> {
        let g = geometry::<T>(m, opt)?;
        let size = std::mem::size_of::<T>();
        let mut staged = StagedDownload {
            chunks: take_chunks(stream.context(), g.nchunks, g.chunk * size)?,
            chunk: g.chunk,
            m,
            threads: g.threads,
            _elem: PhantomData,
        };
        for (k, c) in staged.chunks.iter_mut().enumerate() {
            let start = k * g.chunk;
            let len = g.chunk.min(m - start);
            // SAFETY: the chunk holds at least `chunk * size >= len * size` bytes, and the
            // `len` elements from `start` lie inside `dev` (caller's contract). On an error,
            // dropping `staged` waits for the copies enqueued so far.
            unsafe { c.enqueue_from_device_ptr(stream, dev + (start * size) as u64, len * size)? };
        }
        Ok(staged)
    }

    /// Waits for the copies and scatters the staged elements into host memory at `host`
    /// through `runs`, on up to the `threads` of the options given to `start`; each chunk is
    /// unpacked as soon as its own copy has completed. Then the chunks go back to the pool.
    ///
    /// # Panics
    /// A panic while unpacking (not expected) is resumed once every thread has stopped; the
    /// host elements are then partly written.
    ///
    /// # Safety
    /// `runs` must be the bus order of `start`'s `m` elements over host memory, and the host
    /// elements it reaches from `host` must be writable and accessed by nothing else until
    /// this returns.
    pub(crate) unsafe fn finish(mut self, host: *mut T, runs: &[HostAxis]) -> Result<()> {
        let host = HostPtr(host);
        let (chunk, m) = (self.chunk, self.m);
        let per = self.chunks.len().div_ceil(self.threads).max(1);
        let threads = self.chunks.len().div_ceil(per).max(1);
        let out = run_scoped(&mut self.chunks, per, threads, |w, part, abort| {
            for (i, c) in part.iter().enumerate() {
                if abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                // Waits for this chunk's copy.
                let src = c.as_slice()?.as_ptr().cast::<T>();
                let start = (w * per + i) * chunk;
                let len = chunk.min(m - start);
                // SAFETY: the chunk's copy has completed and it holds the bus elements
                // `start..start + len` (page-aligned, so aligned for `T`); the host elements
                // they map to are written by this worker only (caller's contract, disjoint
                // chunk ranges).
                unsafe { unpack(host.get(), runs, start, src, len) };
            }
            Ok(())
        });
        if let Some(payload) = out.panic {
            // Dropping `self` on the way waits for the copies before releasing the chunks.
            std::panic::resume_unwind(payload);
        }
        out.err.map_or(Ok(()), Err)
    }
}

impl<T> Drop for StagedDownload<T> {
    fn drop(&mut self) {
        let mut idle = Vec::with_capacity(self.chunks.len());
        for c in self.chunks.drain(..) {
            // A chunk whose copy cannot be waited for is dropped here instead, and its own
            // `Drop` leaks the memory rather than free it under the copy.
            if c.synchronize().is_ok() {
                idle.push(c);
            }
        }
        give_back_chunks(idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let ok = TransferOptions::default();
        assert!(ok.check().is_ok());
        for bad in [
            TransferOptions {
                chunk_bytes: 0,
                ..ok
            },
            TransferOptions { threads: 0, ..ok },
            TransferOptions {
                threads: MAX_THREADS + 1,
                ..ok
            },
        ] {
            let e = bad.check().unwrap_err();
            assert_eq!(e.kind(), &crate::ErrorKind::InvalidArgument);
        }
    }

    /// Runs `run_scoped` with four workers of `steps` steps each; worker 2 fails at its step
    /// 3 (by `fail`) once the others wait at their step 4, until `abort` is set. Returns the outcome and
    /// the steps each worker started.
    fn run_with_failure(fail: impl Fn() -> Result<()> + Sync) -> (Outcome, Vec<usize>) {
        use std::sync::atomic::AtomicUsize;
        let steps = 100_000;
        let started: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
        let mut items = vec![0u8; 8];
        let out = run_scoped(&mut items, 2, 4, |w, part, abort| {
            assert_eq!(part.len(), 2);
            for j in 0..steps {
                if abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                started[w].fetch_add(1, Ordering::Relaxed);
                let t0 = std::time::Instant::now();
                let wait_until = |done: &dyn Fn() -> bool| {
                    while !done() && t0.elapsed() < std::time::Duration::from_secs(10) {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                    }
                };
                if (w, j) == (2, 3) {
                    // Fail once every other worker is waiting at its step 4.
                    wait_until(&|| {
                        (0..4).all(|v| v == 2 || started[v].load(Ordering::Relaxed) == 5)
                    });
                    fail()?;
                }
                if j == 4 {
                    wait_until(&|| abort.load(Ordering::Relaxed));
                }
            }
            Ok(())
        });
        (
            out,
            started.iter().map(|s| s.load(Ordering::Relaxed)).collect(),
        )
    }

    #[test]
    fn a_panicking_worker_stops_the_others_and_its_panic_is_handed_back() {
        let (out, started) = run_with_failure(|| panic!("worker 2 fails"));
        let payload = out.panic.expect("the panic is handed back, not re-raised");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"worker 2 fails"));
        assert!(out.err.is_none());
        // The failing worker started 4 steps; the others stopped at their step after `abort`.
        assert_eq!(started, vec![5, 5, 4, 5]);
    }

    #[test]
    fn a_failing_worker_stops_the_others_and_its_error_is_returned() {
        let (out, started) = run_with_failure(|| Err(Error::invalid("worker 2 fails")));
        assert!(out.panic.is_none());
        let e = out.err.expect("the error is returned");
        assert!(e.to_string().contains("worker 2 fails"), "{e}");
        assert_eq!(started, vec![5, 5, 4, 5]);
    }
}
