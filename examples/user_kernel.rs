//! Launching your own kernel on a strided devspan view: the view travels as one by-value
//! parameter (`KernelView`: pointer, shape, strides), and `with_kernel_view_mut` keeps the launch
//! inside cudarc's stream synchronisation for the memory.
//!
//! `cargo run --release --example user_kernel` (needs a GPU; without one it says so and exits).

use cudarc::driver::{LaunchConfig, PushKernelArg};
use devspan::DeviceArray;
use ndarray::{Array2, s};

/// `scale2d(View2 v, float factor)`: multiplies every element of a 2-d f32 view by `factor`,
/// one thread per element, indexing with the view's own strides.
const SCALE2D_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry scale2d(
    .param .align 8 .b8 v[40],
    .param .f32 factor
)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<14>;
    .reg .f32 %f<3>;

    ld.param.u64 %rd1, [v];
    ld.param.u64 %rd2, [v+8];
    ld.param.u64 %rd3, [v+16];
    ld.param.u64 %rd4, [v+24];
    ld.param.u64 %rd5, [v+32];
    ld.param.f32 %f1, [factor];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd6, %r1, %r2;
    cvt.u64.u32 %rd7, %r3;
    add.u64 %rd6, %rd6, %rd7;
    mul.lo.u64 %rd8, %rd2, %rd3;
    setp.ge.u64 %p, %rd6, %rd8;
    @%p bra DONE;
    div.u64 %rd9, %rd6, %rd3;
    rem.u64 %rd10, %rd6, %rd3;
    mul.lo.s64 %rd11, %rd9, %rd4;
    mad.lo.s64 %rd11, %rd10, %rd5, %rd11;
    shl.b64 %rd11, %rd11, 2;
    add.s64 %rd12, %rd1, %rd11;
    ld.global.f32 %f2, [%rd12];
    mul.f32 %f2, %f2, %f1;
    st.global.f32 [%rd12], %f2;
DONE:
    ret;
}
"#;

fn run() -> devspan::Result<()> {
    let stream = devspan::new_stream(0)?;
    let module = stream
        .context()
        .load_module(cudarc::nvrtc::Ptx::from_src(SCALE2D_PTX))?;
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
        // SAFETY: `scale2d` takes (View2, f32), matching the pushed arguments; it touches exactly
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
    if let Err(e) = run() {
        eprintln!("user_kernel failed: {e:#}");
        std::process::exit(1);
    }
}
