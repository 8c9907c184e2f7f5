//! CPU tests of the transfer planner and the host-side gather / scatter, against ndarray, and
//! of how a dropped [`Transfer`](super::Transfer) reports errors; a GPU test of the staging
//! pipeline's handling of a panicking worker.

use std::sync::{Arc, Mutex};

use cudarc::driver::CudaStream;
use ndarray::{ArrayD, IxDyn, SliceInfo, SliceInfoElem};
use rand::{Rng, SeedableRng, rngs::StdRng};

use super::pack::{for_each_run, pack, unpack};
use super::plan::{DevicePath, Direction, HostAxis, HostPath, TransferPlan, plan_transfer};
use crate::error::ErrorKind;
use crate::layout::Layout;

/// `n` rounds natively, `miri` under Miri (which interprets every step; `.ci/miri`).
fn rounds(n: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { n }
}

fn offset(idx: &[usize], strides: &[isize]) -> isize {
    idx.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum()
}

fn plan(shape: &[usize], h: &[isize], d: &[isize], dir: Direction) -> TransferPlan {
    plan_transfer(shape, h, d, 4, dir, None).unwrap()
}

#[test]
fn planner_picks_block_and_direct_for_matching_layouts() {
    let p = plan(&[4, 5], &[5, 1], &[5, 1], Direction::Up);
    assert_eq!(
        (p.host, p.device, p.m),
        (HostPath::Block, DevicePath::Direct, 20)
    );
    let p = plan(&[4, 5], &[1, 4], &[1, 4], Direction::Down);
    assert_eq!((p.host, p.device), (HostPath::Block, DevicePath::Direct));
    // Reversed on both sides: still one block, element zero at the end of the buffer.
    let p = plan(&[4, 5], &[-5, -1], &[-5, -1], Direction::Up);
    assert_eq!(
        (p.host, p.device, p.buf_zero, p.host_start),
        (HostPath::Block, DevicePath::Direct, 19, -19)
    );
}

#[test]
fn planner_moves_layout_changes_to_the_device() {
    // A transposed (dense) host view into a standard device array: one block over the bus,
    // the transpose on the device.
    let p = plan(&[6, 4], &[1, 6], &[4, 1], Direction::Up);
    assert_eq!((p.host, p.device), (HostPath::Block, DevicePath::Staged));
    assert_eq!(p.buf_strides, vec![1, 6]);
    let p = plan(&[6, 4], &[1, 6], &[4, 1], Direction::Down);
    assert_eq!((p.host, p.device), (HostPath::Block, DevicePath::Staged));
}

#[test]
fn planner_packs_gaps_and_sends_broadcasts_once() {
    // Every other element (short runs): packed, gaps are not sent.
    let p = plan(&[100], &[2], &[1], Direction::Up);
    assert_eq!(
        (p.host, p.device, p.m),
        (HostPath::Pack, DevicePath::Direct, 100)
    );
    // Downloads never write the gaps.
    let p = plan(&[100], &[2], &[1], Direction::Down);
    assert_eq!(
        (p.host, p.device, p.m),
        (HostPath::Pack, DevicePath::Direct, 100)
    );
    // Rows of 64 out of 1000: packed (the packed order is the device's standard order).
    let p = plan(&[50, 64], &[1000, 1], &[64, 1], Direction::Up);
    assert_eq!(
        (p.host, p.device, p.m),
        (HostPath::Pack, DevicePath::Direct, 3200)
    );
    // Rows of 900 out of 1000: long runs are packed, gaps are never sent.
    let p = plan(&[50, 900], &[1000, 1], &[900, 1], Direction::Up);
    assert_eq!((p.host, p.device), (HostPath::Pack, DevicePath::Direct));
    // Short runs with larger gaps: packed.
    let p = plan(&[100], &[5], &[1], Direction::Up);
    assert_eq!((p.host, p.device), (HostPath::Pack, DevicePath::Direct));
    // Broadcast host axis: one row goes up, the device broadcasts it.
    let p = plan(&[300, 64], &[0, 1], &[64, 1], Direction::Up);
    assert_eq!(
        (p.host, p.device, p.m),
        (HostPath::Superset, DevicePath::Staged, 64)
    );
    // Forcing the host path.
    let p = plan_transfer(
        &[50, 900],
        &[1000, 1],
        &[900, 1],
        4,
        Direction::Up,
        Some(HostPath::Pack),
    )
    .unwrap();
    assert_eq!((p.host, p.device), (HostPath::Pack, DevicePath::Direct));
    let p = plan_transfer(
        &[100],
        &[2],
        &[1],
        4,
        Direction::Down,
        Some(HostPath::Superset),
    )
    .unwrap();
    assert_eq!(p.host, HostPath::Pack);
}

#[test]
fn planner_handles_empty_and_size_one() {
    let p = plan(&[0, 5], &[5, 1], &[1, 0], Direction::Up);
    assert_eq!(p.m, 0);
    let p = plan(&[], &[], &[], Direction::Down);
    assert_eq!(
        (p.host, p.device, p.m),
        (HostPath::Block, DevicePath::Direct, 1)
    );
    let p = plan(&[1, 1, 7, 1], &[99, -3, 1, 0], &[7, 7, 1, 1], Direction::Up);
    assert_eq!(
        (p.host, p.device, p.m),
        (HostPath::Block, DevicePath::Direct, 7)
    );
}

#[test]
fn planner_refuses_overflowing_host_views() {
    let e = plan_transfer(
        &[3, 4],
        &[isize::MAX / 2, 1],
        &[4, 1],
        4,
        Direction::Up,
        None,
    )
    .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Overflow);
    let e = plan_transfer(
        &[usize::MAX / 2, 4],
        &[4, 1],
        &[4, 1],
        4,
        Direction::Down,
        None,
    )
    .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Overflow);
    // Extent that fits in elements but not in bytes.
    let e = plan_transfer(
        &[2, 2],
        &[isize::MAX / 4, 1],
        &[2, 1],
        8,
        Direction::Up,
        None,
    )
    .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Overflow);
}

#[test]
fn runs_cover_every_index_once() {
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..rounds(200, 20) {
        let r = rng.random_range(1..5);
        let runs: Vec<HostAxis> = (0..r)
            .map(|_| HostAxis {
                len: rng.random_range(1..6),
                stride: rng.random_range(0..4),
            })
            .collect();
        let m: usize = runs.iter().map(|a| a.len).product();
        let a = rng.random_range(0..=m);
        let b = rng.random_range(a..=m);
        let mut seen = vec![0u32; m];
        for_each_run(&runs, a, b, |off, count, pos| {
            for j in 0..count {
                seen[pos + j] += 1;
                // The run's host offsets follow the order's index math.
                let mut rem = pos + j;
                let mut want = 0;
                for ax in &runs {
                    want += (rem % ax.len) * ax.stride;
                    rem /= ax.len;
                }
                assert_eq!(off + j * runs[0].stride, want);
            }
        });
        for (i, &c) in seen.iter().enumerate() {
            assert_eq!(
                c,
                u32::from((a..b).contains(&i)),
                "index {i} of {a}..{b}, runs {runs:?}"
            );
        }
    }
}

/// A random sliced / stepped / reversed / permuted view description over a base array.
fn random_view(rng: &mut StdRng, rank: usize) -> (Vec<usize>, Vec<SliceInfoElem>, Vec<usize>) {
    let base: Vec<usize> = (0..rank).map(|_| rng.random_range(1..7)).collect();
    let sl = base
        .iter()
        .map(|&n| {
            let step = [1isize, 1, 1, 2, -1, -2, 3][rng.random_range(0..7)];
            let start = rng.random_range(0..n) as isize;
            SliceInfoElem::Slice {
                start: if rng.random_bool(0.5) { 0 } else { start },
                end: None,
                step,
            }
        })
        .collect();
    let mut perm: Vec<usize> = (0..rank).collect();
    for i in (1..rank).rev() {
        perm.swap(i, rng.random_range(0..=i));
    }
    (base, sl, perm)
}

fn make_view<'a>(
    a: &'a ArrayD<u32>,
    sl: &[SliceInfoElem],
    perm: &[usize],
) -> ndarray::ArrayViewD<'a, u32> {
    let info = SliceInfo::<_, IxDyn, IxDyn>::try_from(sl.to_vec()).unwrap();
    a.slice(info).permuted_axes(IxDyn(perm))
}

fn random_dev_strides(rng: &mut StdRng, shape: &[usize]) -> Vec<isize> {
    // A standard, Fortran, or the permuted-and-reversed layout of a dense block.
    let rank = shape.len();
    let mut order: Vec<usize> = (0..rank).collect();
    match rng.random_range(0..3) {
        0 => {}
        1 => order.reverse(),
        _ => {
            for i in (1..rank).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
        }
    }
    let mut strides = vec![0isize; rank];
    let mut acc = 1isize;
    for &i in order.iter().rev() {
        strides[i] = if rng.random_bool(0.2) { -acc } else { acc };
        acc *= shape[i].max(1) as isize;
    }
    strides
}

/// Plans every random layout pair both ways, runs the host side over the whole bus buffer in
/// random chunks and checks every element against ndarray's indexing, including the device
/// side (the bus buffer read through its layout, Direct plans through the device layout).
#[test]
fn plans_and_packing_agree_with_ndarray() {
    let mut rng = StdRng::seed_from_u64(42);
    let mut paths = std::collections::BTreeSet::new();
    for case in 0..rounds(3000, 40) {
        let rank = 1 + case % 6;
        let (base, sl, perm) = random_view(&mut rng, rank);
        let n0: usize = base.iter().product();
        let a = ArrayD::from_shape_vec(IxDyn(&base), (0..n0 as u32).map(|x| x * 7 + 1).collect())
            .unwrap();
        let v = make_view(&a, &sl, &perm);
        let shape = v.shape().to_vec();
        let n = v.len();
        let dstr = random_dev_strides(&mut rng, &shape);
        let chunk = rng.random_range(1..8);
        for dir in [Direction::Up, Direction::Down] {
            let force = [None, None, Some(HostPath::Pack), Some(HostPath::Superset)]
                [rng.random_range(0..4)];
            let p = plan_transfer(&shape, v.strides(), &dstr, 4, dir, force).unwrap();
            paths.insert((dir == Direction::Up, p.host, p.device));
            if n == 0 {
                assert_eq!(p.m, 0);
                continue;
            }
            // The bus layout is a valid view over `m` elements; downloads write through it.
            let bl =
                Layout::new_checked(IxDyn(&shape), &p.buf_strides, p.buf_zero, p.m, 4).unwrap();
            if dir == Direction::Down {
                bl.check_unaliased().unwrap();
                assert_ne!(p.host, HostPath::Superset);
            }
            if p.device == DevicePath::Direct {
                assert_eq!(p.m, n);
            }
            let base_ptr = v.as_ptr().wrapping_offset(p.host_start);
            // Host side, in random chunks.
            let mut bus = vec![0u32; p.m];
            let mut s = 0;
            while s < p.m {
                let len = chunk.min(p.m - s);
                // SAFETY: the plan's runs reach elements of `a` (checked by this very test
                // through the indexing below), `bus` holds `m` elements.
                unsafe { pack(base_ptr, &p.runs, s, bus.as_mut_ptr().add(s), len) };
                s += len;
            }
            for (idx, &x) in v.indexed_iter() {
                let idx = ndarray::Dimension::slice(&idx).to_vec();
                let b = p.buf_zero as isize + offset(&idx, &p.buf_strides);
                assert_eq!(bus[b as usize], x, "case {case} {dir:?} {p:?} at {idx:?}");
                if p.device == DevicePath::Direct {
                    // Direct: the device view's own offsets are the bus offsets.
                    assert_eq!(b - p.buf_zero as isize, offset(&idx, &dstr));
                }
            }
            if dir == Direction::Down {
                // Scatter back into a poisoned copy of the base array.
                let mut out = ArrayD::<u32>::from_elem(IxDyn(&base), u32::MAX);
                let info = SliceInfo::<_, IxDyn, IxDyn>::try_from(sl.to_vec()).unwrap();
                let mut ov = out.slice_mut(info).permuted_axes(IxDyn(&perm));
                let optr = ov.as_mut_ptr().wrapping_offset(p.host_start);
                let mut s = 0;
                while s < p.m {
                    let len = chunk.min(p.m - s);
                    // SAFETY: the runs reach exactly the elements of `ov` (a mutable view).
                    unsafe { unpack(optr, &p.runs, s, bus.as_ptr().add(s), len) };
                    s += len;
                }
                let mut want = ArrayD::<u32>::from_elem(IxDyn(&base), u32::MAX);
                let info = SliceInfo::<_, IxDyn, IxDyn>::try_from(sl.to_vec()).unwrap();
                want.slice_mut(info).permuted_axes(IxDyn(&perm)).assign(&v);
                assert_eq!(out, want, "case {case} down {p:?}");
            }
        }
    }
    // Every path combination was exercised.
    for want in [
        (true, HostPath::Block, DevicePath::Direct),
        (true, HostPath::Block, DevicePath::Staged),
        (true, HostPath::Pack, DevicePath::Direct),
        (true, HostPath::Pack, DevicePath::Staged),
        (false, HostPath::Block, DevicePath::Direct),
        (false, HostPath::Block, DevicePath::Staged),
        (false, HostPath::Pack, DevicePath::Direct),
        (false, HostPath::Pack, DevicePath::Staged),
    ] {
        assert!(
            cfg!(miri) || paths.contains(&want),
            "{want:?} never planned: {paths:?}"
        );
    }
}

/// Offset of `idx` with `strides`.
fn offset_of(idx: &[usize], strides: &[isize]) -> isize {
    idx.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum()
}

/// Every index of `shape`, in row-major order.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &len in shape {
        out = out
            .into_iter()
            .flat_map(|p: Vec<usize>| (0..len).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

#[test]
fn block_paths_read_nothing_outside_the_view() {
    // Host views with broadcast, negative, overlapping and gapped strides: whenever the plan
    // sends a block (Block or Superset), every element of the block is an element of the view,
    // so no host memory outside the view is read. Forcing Superset never makes it otherwise.
    let mut rng = StdRng::seed_from_u64(77);
    let mut blocks = 0;
    for _ in 0..rounds(5000, 60) {
        let rank = rng.random_range(1..5);
        let shape: Vec<usize> = (0..rank).map(|_| rng.random_range(1..5)).collect();
        let strides: Vec<isize> = (0..rank)
            .map(|_| rng.random_range(-6i64..7) as isize)
            .collect();
        let dev: Vec<isize> = {
            let mut s = vec![0isize; rank];
            let mut acc = 1isize;
            for i in (0..rank).rev() {
                s[i] = acc;
                acc *= shape[i] as isize;
            }
            s
        };
        for force in [None, Some(HostPath::Superset)] {
            let p = plan_transfer(&shape, &strides, &dev, 4, Direction::Up, force).unwrap();
            if p.host == HostPath::Pack {
                continue;
            }
            blocks += 1;
            let reached: std::collections::BTreeSet<isize> = indices(&shape)
                .iter()
                .map(|i| offset_of(i, &strides))
                .collect();
            for k in 0..p.m as isize {
                assert!(
                    reached.contains(&(p.host_start + k)),
                    "shape {shape:?} strides {strides:?} {force:?}: {p:?} reads offset {} outside the view",
                    p.host_start + k
                );
            }
        }
    }
    assert!(cfg!(miri) || blocks > 100, "only {blocks} block plans");
    // Overlapping host axes, and a broadcast over every other element.
    let p = plan_transfer(&[2, 2, 2], &[0, 3, 4], &[4, 2, 1], 4, Direction::Up, None).unwrap();
    assert_eq!(p.host, HostPath::Pack);
    let p = plan_transfer(&[4, 500], &[0, 2], &[500, 1], 4, Direction::Up, None).unwrap();
    assert_eq!(p.host, HostPath::Pack);
    // A broadcast of a gap-free row still goes up once.
    let p = plan_transfer(&[300, 64], &[0, 1], &[64, 1], 4, Direction::Up, None).unwrap();
    assert_eq!((p.host, p.m), (HostPath::Superset, 64));
}

#[test]
fn stride_lists_of_the_wrong_length_are_errors() {
    let e = plan_transfer(&[2, 2], &[1], &[2, 1], 4, Direction::Up, None).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    let e = plan_transfer(&[2, 2], &[2, 1], &[1], 4, Direction::Down, None).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    assert!(crate::transfer::transfer_path(&[2, 2], &[1], &[2, 1], 4, true).starts_with("error"));
}

#[test]
fn a_dropped_transfer_reports_its_error_on_one_stderr_line() {
    use super::{Transfer, report_dropped};
    use crate::error::Error;
    let mut out = Vec::new();
    report_dropped(&Error::invalid("copy failed\non two lines"), &mut out);
    let line = String::from_utf8(out).unwrap();
    assert!(line.starts_with("devspan: "), "{line}");
    assert!(line.contains("copy failed on two lines"), "{line}");
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.ends_with('\n'));
    // Dropping a transfer runs its finishing once, and a failure there does not panic.
    let calls = std::cell::Cell::new(0);
    let failing = || {
        calls.set(calls.get() + 1);
        Err(Error::invalid("copy failed"))
    };
    drop(Transfer {
        finish: Some(Box::new(failing)),
    });
    assert_eq!(calls.get(), 1);
    // Waiting returns the error, and nothing runs again on drop.
    let t = Transfer {
        finish: Some(Box::new(failing)),
    };
    assert_eq!(t.wait().unwrap_err().kind(), &ErrorKind::InvalidArgument);
    assert_eq!(calls.get(), 2);
}

/// Which way [`a_panicking_staging_worker_stops_the_pipeline`] moves the data.
#[derive(Clone, Copy, Debug)]
enum Way {
    Up,
    Down,
}

/// What the hook of [`staging_fault`] saw.
#[derive(Clone, Debug, Default)]
struct StagingRecord {
    /// Chunk copies each worker issued, by worker.
    started: Vec<usize>,
    /// Whether the fault struck.
    struck: bool,
    /// Whether the faulting worker's panic has unwound out of the hook.
    unwound: bool,
    /// Whether the stream had work in flight (such as the faulting worker's last copy) when
    /// the fault struck.
    stream_busy_at_fault: bool,
}

/// Makes staging worker `worker` of the staged transfers on `stream` (device memory from
/// `base`, `chunk_bytes` per chunk, `workers` workers) panic at the copy of its chunk `chunk`
/// (0 for its first), through a hook at the driver's host <-> device copies. Every other worker
/// is held at its chunk `chunk + 1` until the panic has unwound out of the hook and 100 ms more
/// (the pipeline's abort flag is set on the way up), and the faulting worker strikes only once
/// all the others are held there (each wait gives up after 10 s): the fault strikes while every
/// worker is in the middle of its share.
fn staging_fault(
    stream: &CudaStream,
    base: u64,
    chunk_bytes: usize,
    workers: usize,
    (worker, chunk): (usize, usize),
) -> (crate::driver::fault::Intercept, Arc<Mutex<StagingRecord>>) {
    use crate::driver::fault::{Fault, intercept};
    use std::time::{Duration, Instant};

    let record = Arc::new(Mutex::new(StagingRecord {
        started: vec![0; workers],
        ..StagingRecord::default()
    }));
    let rec = record.clone();
    let key = stream.cu_stream() as usize;
    let guard = intercept(Fault::HostDeviceCopy, move |call| {
        let lock = || rec.lock().unwrap_or_else(|p| p.into_inner());
        if call.stream != key || call.device < base {
            return;
        }
        let k = ((call.device - base) as usize) / chunk_bytes;
        let (w, j) = (k % workers, k / workers);
        lock().started[w] += 1;
        let t0 = Instant::now();
        let wait_until = |done: &dyn Fn() -> bool| {
            while !done() && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_micros(100));
            }
        };
        if w == worker && j == chunk.saturating_sub(1) {
            // Waiting here, one chunk early, leaves the copy issued next in flight when the
            // fault strikes.
            wait_until(&|| {
                let r = lock();
                (0..workers).all(|v| v == w || r.started[v] == chunk + 2)
            });
        }
        if (w, j) == (worker, chunk) {
            // SAFETY: the stream is live (the transfer that makes this call uses it) and not
            // capturing.
            let idle = unsafe { crate::driver::stream_idle(key as crate::driver::CUstream) }
                .unwrap_or(true);
            let mut r = lock();
            r.struck = true;
            r.stream_busy_at_fault = !idle;
            drop(r);
            // Marks the record once the panic unwinds out of this hook, after the panic hook
            // (which may capture a backtrace) has run.
            struct Unwound<'a>(&'a Mutex<StagingRecord>);
            impl Drop for Unwound<'_> {
                fn drop(&mut self) {
                    self.0.lock().unwrap_or_else(|p| p.into_inner()).unwound = true;
                }
            }
            let _unwound = Unwound(&rec);
            panic!("injected staging fault: worker {w}, chunk {j}");
        }
        if j == chunk + 1 {
            wait_until(&|| lock().unwound);
            // The unwinding reaches the pipeline's abort flag a few frames further up.
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    (guard, record)
}

/// A panic injected into one staging worker of a 384 MiB transfer (1 MiB chunks, 4 workers),
/// up and down: the call panics with the worker's payload; every other worker stops at the
/// chunk after the one it was on; the staging chunks go back to the pool; and a following
/// transfer is correct.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_panicking_staging_worker_stops_the_pipeline() {
    use super::pinned::{drain_pool, pooled};
    use super::pipeline::TransferOptions;
    use crate::array::DeviceArray;
    use crate::driver::fault::tests::lock_sites;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    let _sites = lock_sites();
    let stream = crate::testing::gpu_stream();
    let n = 96 << 20;
    let mut rng = StdRng::seed_from_u64(23);
    let mut data = vec![0u32; n];
    rng.fill(data.as_mut_slice());
    // Non-zero, so that the zeros of a fresh array are never mistaken for data.
    data.iter_mut().for_each(|x| *x = (*x).max(1));
    let host = ndarray::Array1::from_vec(data);
    let opt = TransferOptions {
        chunk_bytes: 1 << 20,
        threads: 4,
        host_path: None,
        pinned_direct: false,
    };
    let nchunks = n * 4 / opt.chunk_bytes;
    let first_difference =
        |got: &ndarray::Array1<u32>| got.iter().zip(host.iter()).position(|(a, b)| a != b);
    let mut dev = DeviceArray::<u32, _>::zeros(&stream, n).unwrap();
    let base = dev.view().device_ptr();
    for (way, worker, chunk) in [
        (Way::Up, 1, 3),
        (Way::Down, 2, 4),
        (Way::Up, 0, 6),
        (Way::Down, 0, 0),
        (Way::Up, 3, 0),
    ] {
        let what = format!("{way:?}, worker {worker} fails at its chunk {chunk}");
        let mut out = ndarray::Array1::<u32>::zeros(n);
        // The transfer's chunks are all new, and the pool holds only what it gives back.
        drain_pool();
        let (armed, record) =
            staging_fault(&stream, base, opt.chunk_bytes, opt.threads, (worker, chunk));
        let r = catch_unwind(AssertUnwindSafe(|| match way {
            Way::Up => dev
                .view_mut()
                .copy_from_host_with(&stream, &host.view(), &opt),
            Way::Down => dev
                .view()
                .copy_to_host_with(&stream, &mut out.view_mut(), &opt),
        }));
        drop(armed);
        let record = record.lock().unwrap().clone();
        let payload = match r {
            Ok(r) => panic!("{what}: the call returned {r:?} instead of panicking"),
            Err(p) => p,
        };
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or("(not a string)");
        assert!(msg.contains("injected staging fault"), "{what}: {msg}");
        assert!(record.struck, "{what}");
        // The failing worker started its chunks up to the failing one; the others, held at
        // the chunk after that until the panic had unwound, finished it and stopped.
        let want: Vec<usize> = (0..opt.threads)
            .map(|w| if w == worker { chunk + 1 } else { chunk + 2 })
            .collect();
        assert_eq!(record.started, want, "{what}");
        assert!(record.started.iter().sum::<usize>() < nchunks / 4, "{what}");
        // Every chunk went back to the pool (none was leaked). That this happened only once
        // the stream had completed the copies is not observed here: a later transfer reusing a
        // chunk still in flight would show in the transfer checked below only by chance.
        assert_eq!(pooled(opt.chunk_bytes), 2 * opt.threads, "{what}");
        eprintln!(
            "{what}: copies in flight when the fault struck: {}",
            record.stream_busy_at_fault
        );
        // A following transfer, the same way, with the same options, is correct.
        match way {
            Way::Up => {
                dev.view_mut()
                    .copy_from_host_with(&stream, &host.view(), &opt)
                    .unwrap();
                let back = dev.to_host_on(&stream).unwrap();
                assert_eq!(
                    first_difference(&back),
                    None,
                    "{what}: upload after the fault"
                );
            }
            Way::Down => {
                let mut back = ndarray::Array1::<u32>::zeros(n);
                dev.view()
                    .copy_to_host_with(&stream, &mut back.view_mut(), &opt)
                    .unwrap();
                assert_eq!(
                    first_difference(&back),
                    None,
                    "{what}: download after the fault"
                );
            }
        }
    }
}
