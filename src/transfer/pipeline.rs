//! The pinned staging pipeline for pageable host memory.
//!
//! The bus buffer is cut into chunks of a few MiB. Worker threads (the calling thread is
//! worker 0) take every `threads`-th chunk; each owns two pinned staging chunks, so while the
//! copy engine moves one chunk the worker packs (upload) or unpacks (download) the other. All
//! copies go on the caller's stream, so they keep its ordering with earlier and later work.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaEvent, CudaStream};

use super::dma;
use super::pack::{pack, unpack};
use super::pinned::{PinnedBuffer, give_back_chunks, take_chunks};
use super::plan::{HostAxis, HostPath};
use crate::error::{Error, Result};

/// Options of host <-> device transfers (tests and benchmarks vary them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferOptions {
    /// Bytes per staging chunk.
    pub chunk_bytes: usize,
    /// Worker threads (packing and unpacking), including the calling thread.
    pub threads: usize,
    /// Force a host path where legal (`None`: the planner decides).
    pub host_path: Option<HostPath>,
    /// Copy straight from / into page-locked host memory when the host view is one block.
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
    fn check(&self) -> Result<()> {
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

/// Runs `work(w, two_chunks)` for every worker, `w = 0` on this thread, and returns the chunks
/// to the pool when every copy that used them has completed.
fn run_workers<F>(stream: &Arc<CudaStream>, g: &Geometry, bytes: usize, work: F) -> Result<()>
where
    F: Fn(usize, &mut [PinnedBuffer<u8>], &AtomicBool) -> Result<()> + Sync,
{
    let mut chunks = take_chunks(stream.context(), 2 * g.threads, bytes)?;
    let abort = AtomicBool::new(false);
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    let run = |w: usize, c: &mut [PinnedBuffer<u8>]| {
        if let Err(e) = work(w, c, &abort) {
            abort.store(true, Ordering::Relaxed);
            first_err
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        }
    };
    std::thread::scope(|sc| {
        let (mine, mut others) = chunks.split_at_mut(2);
        for w in 1..g.threads {
            let (c, rest) = std::mem::take(&mut others).split_at_mut(2);
            others = rest;
            let run = &run;
            let spawned = std::thread::Builder::new()
                .name(format!("devspan-staging-{w}"))
                .spawn_scoped(sc, move || run(w, c));
            if let Err(e) = spawned {
                // Worker `w`'s chunks would be skipped: stop everyone and report.
                abort.store(true, Ordering::Relaxed);
                first_err
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(Error::invalid(format!(
                        "could not start a staging thread: {e}"
                    )));
                break;
            }
        }
        run(0, mine);
    });
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        None => {
            give_back_chunks(chunks);
            Ok(())
        }
        Some(e) => {
            if stream.synchronize().is_ok() {
                give_back_chunks(chunks);
            } else {
                // A copy may still use the chunks: never free or reuse them.
                std::mem::forget(chunks);
            }
            Err(e)
        }
    }
}

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

/// Copies the bus buffer of `m` elements, gathered from host memory at `host` through `runs`,
/// to the `m` contiguous device elements at `dev`, and waits until the copies have read the
/// staging chunks (not for the device side to be visible to other streams).
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
        let ev = [ctx.new_event(None)?, ctx.new_event(None)?];
        let mut used = [false; 2];
        let mut go = || -> Result<()> {
            for (j, k) in (w..g.nchunks).step_by(g.threads).enumerate() {
                if abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let s = j % 2;
                if used[s] {
                    ev[s].synchronize()?;
                }
                let start = k * g.chunk;
                let len = g.chunk.min(m - start);
                let buf = chunks[s].as_mut_ptr().cast::<T>();
                // SAFETY: elements `start..start + len` of the bus buffer are host elements
                // (caller's contract); the staging chunk holds `chunk >= len` elements of `T`
                // (page-aligned) and its previous copy has completed (event waited above).
                unsafe { pack(host.get().cast_const(), runs, start, buf, len) };
                used[s] = true;
                // SAFETY: the chunk stays alive and unwritten until `ev[s]` completes (waited
                // before reuse and at the end); the destination range lies inside `dev`.
                unsafe { dma::htod(stream, dev + (start * size) as u64, buf.cast_const(), len)? };
                ev[s].record(stream)?;
            }
            Ok(())
        };
        let r = go();
        wait_all(&ev, used, r)
    })
}

/// Copies the `m` contiguous device elements at `dev` into host memory at `host`, scattered
/// through `runs`, and waits for it.
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
        let ev = [ctx.new_event(None)?, ctx.new_event(None)?];
        let mut used = [false; 2];
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
                // until `ev[s]` completes, and its previous contents were unpacked already.
                unsafe { dma::dtoh(stream, bufs[s], dev + (start * size) as u64, len)? };
                ev[s].record(stream)?;
                Ok(())
            };
            if !mine.is_empty() {
                issue(0, &mut used)?;
            }
            for j in 0..mine.len() {
                if abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                if j + 1 < mine.len() {
                    issue(j + 1, &mut used)?;
                }
                let s = j % 2;
                ev[s].synchronize()?;
                let start = mine[j] * g.chunk;
                let len = g.chunk.min(m - start);
                // SAFETY: the chunk's copy has completed; the bus range maps to host elements
                // that only this worker writes (caller's contract, disjoint chunk ranges).
                unsafe { unpack(host.get(), runs, start, bufs[s].cast_const(), len) };
            }
            Ok(())
        };
        let r = go();
        wait_all(&ev, used, r)
    })
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
}
