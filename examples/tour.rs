//! A first tour of devspan: views, slicing, transposes, and copies to and from the device.
//!
//! Run with `cargo run --release --example tour`. Without a GPU it shows the layout part (pure
//! metadata), says that no GPU was found, and exits cleanly.

use devspan::{DeviceArray, Layout, testing::Tolerance};
use ndarray::{Array2, Array3, Ix2, s};

fn layouts() {
    println!("-- layouts: metadata only, the same rules as ndarray");
    let l = Layout::contiguous(Ix2(4, 6));
    println!("4x6 standard layout:            {l:?}");
    let sl = l.slice(s![1..3, ..;-2]).expect("valid slice");
    println!("slice s![1..3, ..;-2]:          {sl:?}");
    println!(
        "its transpose:                  {:?}",
        sl.clone().reversed_axes()
    );
    match l.slice(s![.., ..7]) {
        Ok(_) => unreachable!(),
        Err(e) => println!("s![.., ..7] is refused:         {e}"),
    }
    match sl.reshape(12usize) {
        Ok(_) => unreachable!(),
        Err(e) => println!("flattening the slice needs a copy: {e}"),
    }
}

fn device() -> devspan::Result<()> {
    let stream = devspan::new_stream(0)?;
    let ctx = stream.context();
    println!("-- device 0: {}", ctx.name()?);

    let host = Array2::from_shape_fn((1024, 768), |(i, j)| (i * 768 + j) as f32);
    let dev = DeviceArray::from_host(&stream, &host)?;
    println!("uploaded {:?} f32 ({} bytes)", dev.shape(), dev.len() * 4);

    // Slicing and transposing are metadata; to_contiguous runs the planner's kernel.
    let view = dev.slice(s![100..900;2, ..;-3]).t();
    println!(
        "view: shape {:?}, strides {:?}, dense: {}",
        view.shape(),
        view.strides(),
        view.is_dense()
    );
    // Operations without an explicit stream run on the stream the memory was made on.
    let packed = view.to_contiguous()?;
    devspan::testing::assert_close(
        &packed,
        &host.slice(s![100..900;2, ..;-3]).t(),
        Tolerance::exact(),
    );
    println!("to_contiguous of the strided transpose matches ndarray");

    // Fused copy + cast.
    let small = host.mapv(|x| (x % 5000.0) / 7.0 - 300.0);
    let dev_small = DeviceArray::from_host(&stream, &small)?;
    let halves = dev_small.cast::<half::f16>()?;
    let back = halves.cast::<f32>()?.to_host()?;
    let worst = (&back - &small)
        .iter()
        .zip(small.iter())
        .map(|(d, h)| (d / h.abs().max(1.0)).abs())
        .fold(0.0f32, f32::max);
    println!(
        "f32 -> f16 -> f32 round trip of values in [-300, 415), worst relative error {worst:.2e} (f16 keeps 11 bits)"
    );
    assert!(worst <= 1.0 / 2048.0);

    // Fill a strided view, then read it back.
    let mut cube = DeviceArray::<i32, _>::zeros(&stream, (4, 5, 6))?;
    cube.slice_mut(s![.., 1..;2, ..;3]).fill(7)?;
    let h = cube.to_host()?;
    let mut expect = Array3::<i32>::zeros((4, 5, 6));
    expect.slice_mut(s![.., 1..;2, ..;3]).fill(7);
    assert_eq!(h, expect);
    println!(
        "strided fill of s![.., 1..;2, ..;3] matches ndarray ({} sevens)",
        h.iter().filter(|&&x| x == 7).count()
    );

    // Broadcast assign: every row gets the same vector.
    let row = DeviceArray::from_host(&stream, &ndarray::arr1(&[1.0f64, 2.0, 3.0]))?;
    let mut m = DeviceArray::<f64, _>::zeros(&stream, (2, 3))?;
    m.assign(&row)?;
    println!("broadcast assign (printed from the device):\n{m}");
    Ok(())
}

fn main() {
    layouts();
    match devspan::device_count() {
        Err(e) => {
            println!("-- no GPU: {e}");
            println!("the device part of the tour needs a CUDA GPU; nothing else to do.");
        }
        Ok(n) => {
            println!("-- {n} CUDA device(s)");
            if let Err(e) = device() {
                eprintln!("device tour failed: {e:#}");
                std::process::exit(1);
            }
        }
    }
}
