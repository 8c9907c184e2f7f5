//! `ElementwiseKernel` bandwidth: `z = a * x + y` in f32 and f16 on contiguous, transposed and
//! sliced (`[:, ::2]`) operands of 2^28 elements, each as a ratio to a device-to-device memcpy
//! of the same traffic (the bytes read plus the bytes written, halved: a memcpy of B bytes
//! reads B and writes B), timed with CUDA events in the same process (median of 21 after 3
//! warm-up runs). Also reports the first call's time, which includes NVRTC's compile and the
//! module load. `cargo bench --bench elementwise` (needs a GPU and NVRTC).

mod common;

use std::time::Instant;

use common::time_events;
use devspan::elementwise::{Arg, ElementwiseKernel};
use devspan::{DeviceArray, DeviceElement};

const SIDE: usize = 16384;

fn memcpy_ms(stream: &std::sync::Arc<cudarc::driver::CudaStream>, bytes: usize) -> f64 {
    let src = stream.alloc_zeros::<u8>(bytes).unwrap();
    let mut dst = stream.alloc_zeros::<u8>(bytes).unwrap();
    time_events(stream, 3, 21, || {
        stream.memcpy_dtod(&src, &mut dst).unwrap()
    })
}

fn run<T: DeviceElement + num_traits::FromPrimitive>(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    name: &str,
) {
    // SAFETY: the body reads its inputs and assigns its output by name.
    let k = unsafe {
        ElementwiseKernel::new(
            &format!("f32 a, {name} x, {name} y"),
            &format!("{name} z"),
            "z = a * x + y",
        )
    }
    .unwrap();
    let size = std::mem::size_of::<T>();
    let fill = |v: f64| T::from_f64(v).unwrap();
    let operand = |cols: usize, v: f64, w: f64| {
        let mut a = DeviceArray::<T, _>::from_elem(stream, (SIDE, cols), fill(v)).unwrap();
        a.slice_mut(ndarray::s![.., ..;3]).fill(fill(w)).unwrap();
        a
    };
    let (x, y) = (operand(SIDE, 1.5, -0.5), operand(SIDE, 0.25, 2.0));
    let (xw, yw) = (operand(2 * SIDE, 1.5, -0.5), operand(2 * SIDE, 0.25, 2.0));
    let mut z = DeviceArray::<T, _>::zeros(stream, (SIDE, SIDE)).unwrap();
    let n = SIDE * SIDE;
    let traffic = 3 * n * size / 2;
    let base = memcpy_ms(stream, traffic);
    let cases = [
        ("contiguous", x.view(), y.view()),
        ("transposed", x.t(), y.t()),
        (
            "sliced [:, ::2]",
            xw.slice(ndarray::s![.., ..;2]),
            yw.slice(ndarray::s![.., ..;2]),
        ),
    ];
    for (i, (case, xv, yv)) in cases.into_iter().enumerate() {
        let mut launch = || {
            k.launch(
                &[Arg::scalar(2.0f32), (&xv).into(), (&yv).into()],
                &mut [(&mut z).into()],
            )
            .unwrap()
        };
        let t0 = Instant::now();
        launch();
        stream.synchronize().unwrap();
        let first = t0.elapsed().as_secs_f64() * 1e3;
        let ms = time_events(stream, 3, 21, &mut launch);
        println!(
            "elementwise {name} a*x+y {case:<16} {ms:8.3} ms  {:7.1} GB/s  ratio {:.3}  (memcpy {base:.3} ms; first call {first:.1} ms{})",
            (traffic * 2) as f64 / ms / 1e6,
            base / ms,
            if i == 0 {
                ", with NVRTC"
            } else {
                ", new variant"
            }
        );
    }
}

fn main() {
    if let Err(e) = devspan::device_count() {
        println!("elementwise bench: no GPU ({e}); nothing to measure");
        return;
    }
    // SAFETY: probing only loads the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        println!("elementwise bench: NVRTC not found; nothing to measure");
        return;
    }
    let stream = devspan::new_stream(0).unwrap();
    run::<f32>(&stream, "f32");
    run::<half::f16>(&stream, "f16");
}
