//! Host time per call of devspan's small operations, two builds side by side: `devspan_old`
//! (an earlier commit, set up by `tools/ab-overhead/run`) and `devspan` (the working tree) are
//! linked into one process and measured in alternation, so that the host's drifts (frequency,
//! placement, neighbours), which move separate processes by 10-20%, fall on both alike. Each
//! measurement is the median of timed blocks of calls; each row gives the median over rounds of
//! new/old with its quartiles, and old'/old: the older build measured twice, the comparison's
//! own noise.
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use half::f16;

const BLOCK: usize = 400;
const BLOCKS: usize = 15;

fn measure(stream: &CudaStream, f: &mut dyn FnMut()) -> f64 {
    for _ in 0..200 {
        f();
    }
    stream.synchronize().unwrap();
    let mut v: Vec<f64> = (0..BLOCKS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..BLOCK {
                f();
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / BLOCK as f64;
            stream.synchronize().unwrap();
            us
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[BLOCKS / 2]
}

struct Bufs {
    src: CudaSlice<f32>,
    dst: CudaSlice<f32>,
    half: CudaSlice<f16>,
}

fn bufs(stream: &Arc<CudaStream>) -> Bufs {
    let n = 1024;
    let host: Vec<f32> = (0..n).map(|i| (i as f32) * 0.37 - 11.0).collect();
    Bufs {
        src: stream.clone_htod(&host).unwrap(),
        dst: stream.alloc_zeros(n).unwrap(),
        half: stream.alloc_zeros(n).unwrap(),
    }
}

type Op<'a> = Box<dyn FnMut() + 'a>;

/// The rows of one build: (name, op). Each row owns its buffers; the views made once borrow
/// buffers leaked for the program's life.
macro_rules! rows {
    ($ds:ident, $stream:expr) => {{
        let s: &Arc<CudaStream> = $stream;
        let (mut b1, mut b2, mut b3, b4, mut b5) = (bufs(s), bufs(s), bufs(s), bufs(s), bufs(s));
        let b6: &'static mut Bufs = Box::leak(Box::new(bufs(s)));
        let b7: &'static mut Bufs = Box::leak(Box::new(bufs(s)));
        let (v6s, mut v6d) = (
            $ds::DeviceView::from(&b6.src),
            $ds::DeviceViewMut::from(&mut b6.dst),
        );
        let mut v7d = $ds::DeviceViewMut::from(&mut b7.dst);
        let v: Vec<(&str, Op)> = vec![
            (
                "copy (views of cudarc slices made per call)",
                Box::new(move || {
                    $ds::DeviceViewMut::from(&mut b1.dst)
                        .assign_on(s, &$ds::DeviceView::from(&b1.src))
                        .unwrap()
                }),
            ),
            (
                "fill (view made per call)",
                Box::new(move || {
                    $ds::DeviceViewMut::from(&mut b2.dst)
                        .fill_on(s, 2.0)
                        .unwrap()
                }),
            ),
            (
                "cast f32->f16 (views made per call)",
                Box::new(move || {
                    $ds::DeviceViewMut::from(&mut b3.half)
                        .assign_cast_on(s, &$ds::DeviceView::from(&b3.src))
                        .unwrap()
                }),
            ),
            (
                "view of a cudarc slice",
                Box::new(move || {
                    std::hint::black_box($ds::DeviceView::from(&b4.src));
                }),
            ),
            (
                "view_mut of a cudarc slice",
                Box::new(move || {
                    std::hint::black_box($ds::DeviceViewMut::from(&mut b5.dst));
                }),
            ),
            (
                "copy (views made once)",
                Box::new(move || v6d.assign_on(s, &v6s).unwrap()),
            ),
            (
                "fill (view made once)",
                Box::new(move || v7d.fill_on(s, 2.0).unwrap()),
            ),
        ];
        v
    }};
}

fn run(label: &str, ctx: &Arc<CudaContext>, rounds: usize) {
    let stream = ctx.new_stream().unwrap();
    let mut old = rows!(devspan_old, &stream);
    let mut new = rows!(devspan, &stream);
    let mut ctl = rows!(devspan_old, &stream);
    println!("{label}");
    for r in 0..old.len() {
        let (mut o, mut n, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            // Order rotates between rounds.
            let mut order = [0usize, 1, 2];
            order.rotate_left(round % 3);
            for which in order {
                match which {
                    0 => o.push(measure(&stream, &mut *old[r].1)),
                    1 => n.push(measure(&stream, &mut *new[r].1)),
                    _ => c.push(measure(&stream, &mut *ctl[r].1)),
                }
            }
        }
        let q = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            let k = v.len();
            (v[k / 4], v[k / 2], v[(3 * k) / 4])
        };
        let ratio = |a: &[f64]| {
            q(a.iter()
                .zip(&o)
                .map(|(x, y)| 100.0 * (x / y - 1.0))
                .collect())
        };
        let (_, om, _) = q(o.clone());
        let (_, nm, _) = q(n.clone());
        let (n1, n2, n3) = ratio(&n);
        let (c1, c2, c3) = ratio(&c);
        println!(
            "  {:<44} old {om:5.3} us  new {nm:5.3} us  new/old {n2:+5.1}% [{n1:+.1}, {n3:+.1}]  old'/old {c2:+5.1}% [{c1:+.1}, {c3:+.1}]",
            old[r].0
        );
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(21);
    let ctx = CudaContext::new(0).unwrap();
    run(
        "event tracking on (cudarc's default with several streams):",
        &ctx,
        rounds,
    );
    // SAFETY: the harness uses one stream at a time from here on; buffers are allocated after.
    unsafe { ctx.disable_event_tracking() };
    run("event tracking off:", &ctx, rounds);
}
