//! Timing shared by the benches: CUDA-event timing of a closure and medians.

use cudarc::driver::CudaStream;
use cudarc::driver::sys::CUevent_flags;

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median milliseconds of `f` over `reps` runs after `warmup` untimed ones, each run bracketed
/// by its own pair of events recorded on `stream`.
pub fn time_events(stream: &CudaStream, warmup: usize, reps: usize, f: impl FnMut()) -> f64 {
    time_events_after(stream, || {}, warmup, reps, f)
}

/// [`time_events`], with `before` called ahead of each timed run's first event (it may queue
/// work on `stream` that the events then leave out).
pub fn time_events_after(
    stream: &CudaStream,
    mut before: impl FnMut(),
    warmup: usize,
    reps: usize,
    mut f: impl FnMut(),
) -> f64 {
    let ctx = stream.context();
    for _ in 0..warmup {
        f();
    }
    stream.synchronize().unwrap();
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap();
        let b = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap();
        before();
        a.record(stream).unwrap();
        f();
        b.record(stream).unwrap();
        b.synchronize().unwrap();
        t.push(a.elapsed_ms(&b).unwrap() as f64);
    }
    median(t)
}
