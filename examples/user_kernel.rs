//! Launching your own kernel on a strided devspan view: the view travels as one by-value
//! parameter (`KernelView`: pointer, shape, strides), which the kernel reads as a
//! `devspan_view<float, 2>` from devspan's CUDA header (compiled here with NVRTC), and
//! `with_kernel_view_mut` keeps the launch inside cudarc's stream synchronisation for the
//! memory.
//!
//! `cargo run --release --example user_kernel` (needs a GPU; without one it says so and exits).

use cudarc::driver::{LaunchConfig, PushKernelArg};
use devspan::DeviceArray;
use ndarray::{Array2, s};

/// `scale2d(v, factor)`: multiplies every element of a 2-d f32 view by `factor`, indexing it
/// through `devspan_view` (the header `devspan::interop::DEVICE_HEADER`), which maps the i-th
/// element in logical order to its offset at the view's strides.
const SCALE2D_CU: &str = r#"
extern "C" __global__ void scale2d(devspan_view<float, 2> v, float factor) {
  const unsigned long long n = v.size();
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    v[i] *= factor;
}
"#;

fn run() -> devspan::Result<()> {
    let stream = devspan::new_stream(0)?;
    let src = format!("{}\n{SCALE2D_CU}", devspan::interop::DEVICE_HEADER);
    let ptx = cudarc::nvrtc::compile_ptx(src)
        .map_err(|e| devspan::Error::new(devspan::ErrorKind::Compile, format!("NVRTC: {e:?}")))?;
    let module = stream.context().load_module(ptx)?;
    let scale2d = module.load_function("scale2d")?;

    let host = Array2::from_shape_fn((300, 200), |(i, j)| (i * 200 + j) as f32);
    let mut dev = DeviceArray::from_host(&stream, &host)?;

    // Every other row, columns reversed: a strided, negative-stride view. A borrowed view's
    // borrow ends at its last use, as with ndarray's views.
    let mut sub = dev.slice_mut(s![..;2, ..;-1]);
    println!(
        "scaling a view of shape {:?}, strides {:?}",
        sub.shape(),
        sub.strides()
    );
    sub.with_kernel_view_mut::<2, _>(&stream, |kv| {
        let n = (kv.shape[0] * kv.shape[1]) as u32;
        let factor = 2.0f32;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(256).max(1), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(&scale2d);
        launch.arg(&kv).arg(&factor);
        // SAFETY: `scale2d` takes (devspan_view<float, 2>, float), matching the pushed arguments; it touches exactly
        // the elements the validated view reaches, each once.
        unsafe { launch.launch(cfg)? };
        Ok(())
    })?;

    let got = dev.to_host()?;
    let mut expect = host.clone();
    expect.slice_mut(s![..;2, ..;-1]).mapv_inplace(|x| x * 2.0);
    assert_eq!(got, expect);
    println!("the user kernel scaled exactly the elements of the strided view");
    Ok(())
}

fn main() {
    if let Err(e) = devspan::device_count() {
        println!("no GPU: {e}; this example needs a CUDA GPU.");
        return;
    }
    // SAFETY: probing only loads the library, so that a missing NVRTC is a message here
    // instead of a panic inside cudarc.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        println!("NVRTC (libnvrtc.so) not found; this example compiles its kernel with it.");
        return;
    }
    if let Err(e) = run() {
        eprintln!("user_kernel failed: {e:#}");
        std::process::exit(1);
    }
}
