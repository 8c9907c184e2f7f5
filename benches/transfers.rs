//! Host <-> device transfer bench: every target workload's median time over 21 timed runs (CUDA
//! events around the call, after warm-up), its GB/s (bytes of the array, one way) and its
//! ratio to a raw `cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync` of the same bytes between
//! page-locked memory and the device, measured in the same process. Data: 1 GiB of random bits.
//! Informational rows (thread / chunk variations, driver pageable copies, planner evidence)
//! use 5 runs. Prints a table and writes `transfers-results.json` (or the path in `DEVSPAN_BENCH_JSON`).
//!
//! `cargo bench --bench transfers` (needs a GPU; without one it says so and exits); `--quick`
//! runs fewer repetitions.

mod common;

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr};
use devspan::internals::transfer_path;
use devspan::{DeviceArray, HostPath, PinnedBuffer, TransferOptions};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, s};

use common::time_events;

const GIB: usize = 1 << 30;
const SIDE: usize = 16384;

struct Bench {
    stream: Arc<CudaStream>,
    reps: usize,
    warmup: usize,
    rows: Vec<Row>,
}

struct Row {
    name: String,
    path: String,
    bytes: usize,
    ms: f64,
    ref_ms: f64,
    target: Option<f64>,
}

impl Row {
    fn gbs(&self) -> f64 {
        self.bytes as f64 / self.ms / 1e6
    }
    fn ratio(&self) -> f64 {
        self.ref_ms / self.ms
    }
}

impl Bench {
    /// Median milliseconds of `f`, each run bracketed by its own pair of events (the calls
    /// wait for their transfer, so this is the call's duration).
    fn time(&self, f: impl FnMut()) -> f64 {
        time_events(&self.stream, self.warmup, self.reps, f)
    }

    fn record(
        &mut self,
        name: &str,
        path: String,
        bytes: usize,
        ms: f64,
        ref_ms: f64,
        target: Option<f64>,
    ) {
        let row = Row {
            name: name.into(),
            path,
            bytes,
            ms,
            ref_ms,
            target,
        };
        println!(
            "{:<58} {:<16} {:>9.3} ms {:>7.2} GB/s  ratio {:>5.3}{}",
            row.name,
            row.path,
            row.ms,
            row.gbs(),
            row.ratio(),
            match row.target {
                Some(t) if row.ratio() >= t => format!("  (target {t:.2}: met)"),
                Some(t) => format!(
                    "  (target {t:.2}: MISSED by {:.1}%)",
                    (t - row.ratio()) / t * 100.0
                ),
                None => String::new(),
            }
        );
        self.rows.push(row);
    }
}

/// `n` random f32 bit patterns (never all zeros), filled by several threads.
fn random_words(out: &mut [f32], seed: u64) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(16);
    let per = out.len().div_ceil(threads);
    std::thread::scope(|sc| {
        for (t, part) in out.chunks_mut(per).enumerate() {
            sc.spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ seed ^ ((t as u64 + 1) << 32);
                for w in part {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *w = f32::from_bits((x >> 16) as u32 | 1);
                }
            });
        }
    });
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    bytemuck::cast_slice::<f32, u32>(a) == bytemuck::cast_slice::<f32, u32>(b)
}

/// Bit equality of two views of the same shape (random bits include NaNs).
fn same_view(a: &ArrayView2<f32>, b: &ArrayView2<f32>) -> bool {
    a.shape() == b.shape()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| x.to_bits() == y.to_bits())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = devspan::device_count() {
        println!("transfers bench: no GPU ({e}); nothing to measure");
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let stream = devspan::new_stream(0).unwrap();
    let ctx = stream.context().clone();
    let reps = if quick { 5 } else { 21 };
    println!(
        "device: {}; host threads available: {}; reps {reps}",
        ctx.name().unwrap(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut b = Bench {
        stream: stream.clone(),
        reps,
        warmup: 2,
        rows: Vec::new(),
    };
    let n = GIB / 4;
    let default = TransferOptions::default();
    println!(
        "staging: {} KiB chunks, {} threads",
        default.chunk_bytes >> 10,
        default.threads
    );

    // Host data: pageable (ordinary Vec) and page-locked, all random, all touched.
    let mut src = Array1::<f32>::zeros(n);
    random_words(src.as_slice_mut().unwrap(), 1);
    let mut dst = Array1::<f32>::zeros(n);
    random_words(dst.as_slice_mut().unwrap(), 2);
    let pin_src = PinnedBuffer::from_slice(&ctx, src.as_slice().unwrap()).unwrap();
    let mut pin_dst = PinnedBuffer::<f32>::zeros(&ctx, n).unwrap();
    let mut dev = DeviceArray::<f32, _>::zeros(&stream, n).unwrap();

    // References: raw pinned copies of the same bytes.
    let dptr = {
        let (p, _g) = dev.as_cuda_slice().device_ptr(&stream);
        p
    };
    let raw_up = {
        let p = pin_src.as_slice().unwrap().as_ptr();
        b.time(|| unsafe {
            cudarc::driver::sys::cuMemcpyHtoDAsync_v2(dptr, p.cast(), GIB, stream.cu_stream())
                .result()
                .unwrap()
        })
    };
    let raw_down = {
        let p = pin_dst.as_mut_slice().unwrap().as_mut_ptr();
        b.time(|| unsafe {
            cudarc::driver::sys::cuMemcpyDtoHAsync_v2(p.cast(), dptr, GIB, stream.cu_stream())
                .result()
                .unwrap()
        })
    };
    println!(
        "reference: pinned cuMemcpyHtoDAsync {:.3} ms ({:.2} GB/s), cuMemcpyDtoHAsync {:.3} ms ({:.2} GB/s)",
        raw_up,
        GIB as f64 / raw_up / 1e6,
        raw_down,
        GIB as f64 / raw_down / 1e6
    );
    // Informational rows (not targets) use 5 repetitions to keep the run short.
    let full_reps = b.reps;
    b.reps = full_reps.min(5);
    // The driver's own pageable copies, for comparison.
    let drv_up = b.time(|| unsafe {
        cudarc::driver::sys::cuMemcpyHtoDAsync_v2(
            dptr,
            src.as_ptr().cast(),
            GIB,
            stream.cu_stream(),
        )
        .result()
        .unwrap();
        stream.synchronize().unwrap();
    });
    b.record(
        "driver cuMemcpyHtoD from pageable 1 GiB (for comparison)",
        "driver".into(),
        GIB,
        drv_up,
        raw_up,
        None,
    );
    let dp = dst.as_mut_ptr();
    let drv_down = b.time(|| unsafe {
        cudarc::driver::sys::cuMemcpyDtoHAsync_v2(dp.cast(), dptr, GIB, stream.cu_stream())
            .result()
            .unwrap();
        stream.synchronize().unwrap();
    });
    b.record(
        "driver cuMemcpyDtoH to pageable 1 GiB (for comparison)",
        "driver".into(),
        GIB,
        drv_down,
        raw_down,
        None,
    );

    b.reps = full_reps;
    // 1 GiB pageable, contiguous, both ways.
    let up_path = transfer_path(&[n], &[1], &[1], 4, true);
    let ms = b.time(|| {
        dev.view_mut()
            .copy_from_host_on(&stream, &src.view())
            .unwrap()
    });
    b.record(
        "pageable -> device, f32 1 GiB",
        up_path.clone(),
        GIB,
        ms,
        raw_up,
        Some(0.6),
    );
    assert!(same_bits(
        dev.to_host_on(&stream).unwrap().as_slice().unwrap(),
        src.as_slice().unwrap()
    ));
    let ms = b.time(|| {
        dev.view()
            .copy_to_host_on(&stream, &mut dst.view_mut())
            .unwrap()
    });
    b.record(
        "device -> pageable, f32 1 GiB",
        up_path.clone(),
        GIB,
        ms,
        raw_down,
        Some(0.6),
    );
    assert!(same_bits(dst.as_slice().unwrap(), src.as_slice().unwrap()));
    b.reps = full_reps.min(5);
    let ms = b.time(|| drop(dev.to_host_on(&stream).unwrap()));
    b.record(
        "device -> new host array (to_host, page faults), 1 GiB",
        up_path.clone(),
        GIB,
        ms,
        raw_down,
        None,
    );
    // Thread and chunk variations (the defaults are chosen from these).
    for (threads, chunk) in [
        (1, 4 << 20),
        (2, 4 << 20),
        (4, 4 << 20),
        (8, 4 << 20),
        (8, 1 << 20),
        (8, 16 << 20),
        (16, 4 << 20),
    ] {
        let opt = TransferOptions {
            threads,
            chunk_bytes: chunk,
            ..default
        };
        let ms = b.time(|| {
            dev.view_mut()
                .copy_from_host_with(&stream, &src.view(), &opt)
                .unwrap()
        });
        b.record(
            &format!("  up, {threads} threads, {} MiB chunks", chunk >> 20),
            up_path.clone(),
            GIB,
            ms,
            raw_up,
            None,
        );
        let ms = b.time(|| {
            dev.view()
                .copy_to_host_with(&stream, &mut dst.view_mut(), &opt)
                .unwrap()
        });
        b.record(
            &format!("  down, {threads} threads, {} MiB chunks", chunk >> 20),
            up_path.clone(),
            GIB,
            ms,
            raw_down,
            None,
        );
    }

    b.reps = full_reps;
    // 1 GiB page-locked through the same calls (detected, copied directly).
    {
        let pv = ArrayView1::from(pin_src.as_slice().unwrap());
        let ms = b.time(|| dev.view_mut().copy_from_host_on(&stream, &pv).unwrap());
        b.record(
            "pinned -> device (copy_from_host), f32 1 GiB",
            "direct".into(),
            GIB,
            ms,
            raw_up,
            Some(0.97),
        );
        let ms = b.time(|| {
            pin_src
                .copy_to_device(&stream, &mut dev.view_mut())
                .unwrap()
        });
        b.record(
            "pinned -> device (PinnedBuffer::copy_to_device), 1 GiB",
            "direct".into(),
            GIB,
            ms,
            raw_up,
            Some(0.97),
        );
    }
    {
        let ms = b.time(|| pin_dst.copy_from_device(&stream, &dev.view()).unwrap());
        b.record(
            "device -> pinned (PinnedBuffer::copy_from_device), 1 GiB",
            "direct".into(),
            GIB,
            ms,
            raw_down,
            Some(0.97),
        );
        let mut pv = ArrayViewMut1::from(pin_dst.as_mut_slice().unwrap());
        let ms = b.time(|| dev.view().copy_to_host_on(&stream, &mut pv).unwrap());
        b.record(
            "device -> pinned (copy_to_host), f32 1 GiB",
            "direct".into(),
            GIB,
            ms,
            raw_down,
            Some(0.97),
        );
        assert!(same_bits(
            pin_dst.as_slice().unwrap(),
            src.as_slice().unwrap()
        ));
    }

    // Transposed 16384 x 16384 f32 host view <-> contiguous device array.
    {
        let host2 = ArrayView2::from_shape((SIDE, SIDE), src.as_slice().unwrap()).unwrap();
        let ht = host2.t();
        {
            let mut dev2 = dev.view_mut().into_shape_with_order((SIDE, SIDE)).unwrap();
            let p = transfer_path(&[SIDE, SIDE], ht.strides(), &[SIDE as isize, 1], 4, true);
            let ms = b.time(|| dev2.copy_from_host_on(&stream, &ht).unwrap());
            b.record(
                "transposed 16384^2 f32 host view -> contiguous device",
                p,
                GIB,
                ms,
                raw_up,
                Some(0.5),
            );
        }
        let back = dev
            .view()
            .into_shape_with_order((SIDE, SIDE))
            .unwrap()
            .to_host_on(&stream)
            .unwrap();
        assert!(same_view(&back.view(), &ht));
        drop(back);
        let dev2 = dev.view().into_shape_with_order((SIDE, SIDE)).unwrap();
        let mut out = Array2::<f32>::zeros((SIDE, SIDE));
        random_words(out.as_slice_mut().unwrap(), 3);
        let p = transfer_path(
            &[SIDE, SIDE],
            &[1, SIDE as isize],
            &[SIDE as isize, 1],
            4,
            false,
        );
        let ms = b.time(|| {
            dev2.copy_to_host_on(&stream, &mut out.view_mut().reversed_axes())
                .unwrap()
        });
        b.record(
            "contiguous device -> transposed 16384^2 f32 host view",
            p,
            GIB,
            ms,
            raw_down,
            Some(0.5),
        );
        assert!(same_view(&out.t(), &ht));
    }

    // Planner evidence: host views with gaps, superset vs packing on the host.
    b.reps = full_reps.min(5);
    {
        let host2 = ArrayView2::from_shape((SIDE, SIDE), src.as_slice().unwrap()).unwrap();
        let cases: [(&str, ArrayView2<f32>); 3] = [
            ("every other column (short runs)", host2.slice(s![.., ..;2])),
            (
                "first 3/4 of every row",
                host2.slice(s![.., ..SIDE / 4 * 3]),
            ),
            (
                "first 1/4 of every row (pitched)",
                host2.slice(s![.., ..SIDE / 4]),
            ),
        ];
        for (name, v) in cases {
            let bytes = v.len() * 4;
            let mut d = DeviceArray::<f32, _>::zeros(&stream, v.raw_dim()).unwrap();
            let chosen = transfer_path(v.shape(), v.strides(), d.view().strides(), 4, true);
            // The planner sends no block with gaps (that would read host memory outside the
            // view), so every one of these views is packed; the row shows the rate.
            let opt = TransferOptions {
                host_path: Some(HostPath::Pack),
                ..default
            };
            let ms = b.time(|| d.view_mut().copy_from_host_with(&stream, &v, &opt).unwrap());
            b.record(
                &format!("{name}, up, packed (planner: {chosen})"),
                "pack".to_string(),
                bytes,
                ms,
                raw_up * bytes as f64 / GIB as f64,
                None,
            );
            assert!(same_view(&d.to_host_on(&stream).unwrap().view(), &v));
        }
    }
    drop(dev);

    let mut json = String::from("{\n  \"reference_ms\": {");
    json += &format!("\"pinned_htod_1gib\": {raw_up:.5}, \"pinned_dtoh_1gib\": {raw_down:.5}}},\n");
    json += &format!(
        "  \"staging\": {{\"chunk_bytes\": {}, \"threads\": {}}},\n  \"rows\": [\n",
        default.chunk_bytes, default.threads
    );
    for (i, r) in b.rows.iter().enumerate() {
        json += &format!(
            "    {{\"name\": \"{}\", \"path\": \"{}\", \"bytes\": {}, \"ms\": {:.5}, \"gbs\": {:.2}, \"ref_ms\": {:.5}, \"ratio\": {:.4}, \"target\": {}}}{}\n",
            r.name.trim(),
            r.path,
            r.bytes,
            r.ms,
            r.gbs(),
            r.ref_ms,
            r.ratio(),
            r.target.map_or("null".into(), |t| format!("{t}")),
            if i + 1 < b.rows.len() { "," } else { "" }
        );
    }
    json += "  ]\n}\n";
    let path =
        std::env::var("DEVSPAN_BENCH_JSON").unwrap_or_else(|_| "transfers-results.json".into());
    std::fs::write(&path, json).unwrap();
    println!("wrote {path}");
}
