//! Natural user code, written the way an ndarray user writes it: every snippet compiles as it
//! stands (no `.view()` in between, no hand-scoped borrows), and the GPU test runs each one and
//! checks its values against ndarray. What must stay refused is in the crate's `compile_fail`
//! doc tests (`src/compile_fail.rs`).
//!
//! A module of the `gpu` test binary (`tests/gpu/main.rs`): `cargo test --test gpu ergonomics`.
//! Marked `#[ignore]` so that machines without a GPU report it as ignored; the GPU runner passes
//! `--include-ignored` with `DEVSPAN_REQUIRE_GPU=1`.

use std::error::Error;
use std::sync::Arc;

use cudarc::driver::CudaStream;
use devspan::testing::{Tolerance, assert_close, gpu_stream};
use devspan::{DeviceArray, DeviceBase, DeviceView, ErrorKind, SpanData};
use half::f16;
use ndarray::{
    ArcArray, Array, Array1, Array2, Array3, Axis, CowArray, Dimension, Ix1, Ix2, Order, s,
};

type Res = Result<(), Box<dyn Error>>;

/// A 2-d host array with no two equal elements and no zeros.
fn host2(rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, j)| (i * cols + j) as f32 + 0.5)
}

fn from_host_owned_array(stream: &Arc<CudaStream>) -> Res {
    let host = host2(3, 4);
    let dev = DeviceArray::from_host(stream, &host)?;
    assert_eq!(dev.to_host()?, host);
    Ok(())
}

fn from_host_view_and_transposed_view(stream: &Arc<CudaStream>) -> Res {
    let host = host2(5, 3);
    let dev = DeviceArray::from_host(stream, &host.view())?;
    let dev_t = DeviceArray::from_host(stream, &host.t())?;
    assert_eq!(dev.to_host()?, host);
    assert_eq!(dev_t.to_host()?, host.t());
    Ok(())
}

fn from_host_arc_and_cow(stream: &Arc<CudaStream>) -> Res {
    let arc: ArcArray<f32, Ix2> = host2(2, 6).into_shared();
    let base = host2(4, 2);
    let cow = CowArray::from(base.view());
    assert_eq!(DeviceArray::from_host(stream, &arc)?.to_host()?, arc);
    assert_eq!(DeviceArray::from_host(stream, &cow)?.to_host()?, cow);
    Ok(())
}

fn slice_then_use_the_parent(stream: &Arc<CudaStream>) -> Res {
    let host = host2(6, 4);
    let dev = DeviceArray::from_host(stream, &host)?;
    let evens = dev.slice(s![..;2, ..]);
    assert_eq!(evens.to_host()?, host.slice(s![..;2, ..]));
    assert_eq!(dev.to_host()?, host);
    Ok(())
}

fn slice_mut_then_use_the_parent(stream: &Arc<CudaStream>) -> Res {
    let mut dev = DeviceArray::from_host(stream, &host2(4, 5))?;
    let mut col = dev.slice_mut(s![.., 0]);
    col.fill(-1.0)?;
    let back = dev.to_host()?;
    let mut expect = host2(4, 5);
    expect.column_mut(0).fill(-1.0);
    assert_eq!(back, expect);
    Ok(())
}

fn named_mutable_view_then_the_parent(stream: &Arc<CudaStream>) -> Res {
    let mut dev = DeviceArray::<f32, _>::zeros(stream, (4, 6))?;
    let mut v = dev.view_mut();
    let mut sub = v.slice_mut(s![..;2, ..;-1]);
    sub.fill(2.0)?;
    let h = dev.to_host()?;
    assert_eq!(h.slice(s![..;2, ..]).sum(), 2.0 * 12.0);
    assert_eq!(h.slice(s![1..;2, ..]).sum(), 0.0);
    Ok(())
}

fn transpose_an_array_directly(stream: &Arc<CudaStream>) -> Res {
    let host = host2(3, 7);
    let dev = DeviceArray::from_host(stream, &host)?;
    assert_eq!(dev.t().shape(), &[7, 3]);
    assert_eq!(dev.t().to_host()?, host.t());
    Ok(())
}

fn chain_slice_t_cast(stream: &Arc<CudaStream>) -> Res {
    let host = host2(5, 6);
    let dev = DeviceArray::from_host(stream, &host)?;
    let got = dev.slice(s![1.., ..;-2]).t().cast::<f64>()?;
    assert_eq!(
        got.to_host()?,
        host.slice(s![1.., ..;-2]).t().mapv(f64::from)
    );
    Ok(())
}

fn chain_slice_move_index_axis_move(stream: &Arc<CudaStream>) -> Res {
    let host = host2(6, 5);
    let dev = DeviceArray::from_host(stream, &host)?;
    let row = dev
        .view()
        .slice_move(s![..;2, ..])
        .t()
        .index_axis_move(Axis(0), 3);
    assert_eq!(row.to_host()?, host.slice(s![..;2, 3]));
    Ok(())
}

fn owned_array_layout_ops_consume(stream: &Arc<CudaStream>) -> Res {
    let host = host2(4, 6);
    let dev = DeviceArray::from_host(stream, &host)?;
    let moved = dev.slice_move(s![1..3, ..]).reversed_axes();
    assert_eq!(moved.to_host()?, host.slice(s![1..3, ..]).t());
    Ok(())
}

fn fill_on_the_arrays_stream(stream: &Arc<CudaStream>) -> Res {
    let mut a = DeviceArray::<f32, _>::zeros(stream, (3, 3))?;
    a.fill(1.0)?;
    assert_eq!(a.to_host()?, Array2::from_elem((3, 3), 1.0f32));
    Ok(())
}

fn fill_on_another_stream(stream: &Arc<CudaStream>) -> Res {
    let other = devspan::new_stream(0)?;
    let mut a = DeviceArray::<i32, _>::zeros(stream, 10)?;
    a.fill_on(&other, 7)?;
    assert_eq!(a.to_host_on(&other)?, Array1::from_elem(10, 7));
    Ok(())
}

fn cast_to_f16(stream: &Arc<CudaStream>) -> Res {
    let host = host2(2, 3);
    let a = DeviceArray::from_host(stream, &host)?;
    let h = a.cast::<f16>()?;
    assert_eq!(h.to_host()?, host.mapv(f16::from_f32));
    Ok(())
}

fn clone_an_array(stream: &Arc<CudaStream>) -> Res {
    let a = DeviceArray::from_host(stream, &host2(3, 5))?;
    let b = a.clone();
    let c = a.t().try_clone()?;
    assert_eq!(b.to_host()?, a.to_host()?);
    assert!(c.is_standard_layout());
    assert_eq!(c.to_host()?, host2(3, 5).t());
    Ok(())
}

fn print_an_array_as_ndarray_does(stream: &Arc<CudaStream>) -> Res {
    let host = host2(2, 3);
    let a = DeviceArray::from_host(stream, &host)?;
    assert_eq!(format!("{a}"), format!("{host}"));
    assert_eq!(format!("{:.2}", a.t()), format!("{:.2}", host.t()));
    Ok(())
}

fn print_a_large_array_summarised(stream: &Arc<CudaStream>) -> Res {
    let host = Array2::from_shape_fn((300, 400), |(i, j)| ((i * 400 + j) % 97) as u16 + 1);
    let a = DeviceArray::from_host(stream, &host)?;
    let text = a.to_string();
    assert_eq!(text, host.to_string());
    assert!(text.contains("..."));
    Ok(())
}

fn debug_print(stream: &Arc<CudaStream>) -> Res {
    let a = DeviceArray::<u8, _>::zeros(stream, (2, 2))?;
    let d = format!("{a:?} {:?}", a.view());
    assert!(d.contains("DeviceArray") && d.contains("DeviceView"));
    Ok(())
}

fn question_mark_on_devspan_errors(stream: &Arc<CudaStream>) -> Res {
    fn reshape_badly(a: &DeviceArray<f32, Ix2>) -> Result<(), Box<dyn Error>> {
        let _v = a.view().into_shape_with_order(7)?;
        Ok(())
    }
    let a = DeviceArray::<f32, _>::zeros(stream, (2, 3))?;
    let e = reshape_badly(&a).unwrap_err();
    let e = e.downcast_ref::<devspan::Error>().expect("a devspan error");
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    Ok(())
}

fn assign_broadcast_row(stream: &Arc<CudaStream>) -> Res {
    let row = DeviceArray::from_host(stream, &ndarray::arr1(&[1.0f64, 2.0, 3.0]))?;
    let mut m = DeviceArray::<f64, _>::zeros(stream, (2, 3))?;
    m.assign(&row)?;
    assert_eq!(
        m.to_host()?,
        ndarray::array![[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    );
    Ok(())
}

fn assign_a_transposed_array(stream: &Arc<CudaStream>) -> Res {
    let host = host2(3, 4);
    let src = DeviceArray::from_host(stream, &host)?;
    let mut dst = DeviceArray::<f32, _>::zeros(stream, (4, 3))?;
    dst.assign(&src.t())?;
    assert_eq!(dst.to_host()?, host.t());
    Ok(())
}

fn assign_cast_from_an_array(stream: &Arc<CudaStream>) -> Res {
    let src = DeviceArray::from_host(stream, &ndarray::arr1(&[-1.5f32, 2.7, 300.0]))?;
    let mut dst = DeviceArray::<u8, _>::zeros(stream, 3)?;
    dst.assign_cast(&src)?;
    assert_eq!(dst.to_host()?, ndarray::arr1(&[0u8, 2, 255]));
    Ok(())
}

fn to_shape_view_or_copy(stream: &Arc<CudaStream>) -> Res {
    let host = host2(2, 6);
    let a = DeviceArray::from_host(stream, &host)?;
    let v = a.to_shape((3, 4))?;
    assert!(v.is_view());
    assert_eq!(v.to_host()?, host.to_shape((3, 4))?);
    let t = a.t();
    let c = t.to_shape(12)?;
    assert!(c.is_owned());
    assert_eq!(c.to_host()?, host.t().to_shape(12)?);
    let f = a.to_shape(((4, 3), Order::ColumnMajor))?;
    assert_eq!(f.to_host()?, host.to_shape(((4, 3), Order::ColumnMajor))?);
    Ok(())
}

fn into_shape_with_order_on_an_array(stream: &Arc<CudaStream>) -> Res {
    let host = host2(3, 4);
    let a = DeviceArray::from_host(stream, &host)?;
    let flat = a.into_shape_with_order(12)?;
    assert_eq!(flat.to_host()?, host.into_shape_with_order(12)?);
    Ok(())
}

fn broadcast_an_array(stream: &Arc<CudaStream>) -> Res {
    let host = ndarray::arr1(&[1u32, 2, 3]);
    let a = DeviceArray::from_host(stream, &host)?;
    let b = a.broadcast((4, 3))?;
    assert_eq!(b.to_host()?, host.broadcast((4, 3)).unwrap());
    Ok(())
}

fn copy_from_host_into_a_slice(stream: &Arc<CudaStream>) -> Res {
    let mut dev = DeviceArray::<f32, _>::zeros(stream, (4, 4))?;
    let patch = host2(2, 4);
    dev.slice_mut(s![1..3, ..]).copy_from_host(&patch)?;
    assert_eq!(dev.to_host()?.slice(s![1..3, ..]), patch);
    Ok(())
}

fn copy_to_host_into_a_transposed_host_view(stream: &Arc<CudaStream>) -> Res {
    let host = host2(3, 5);
    let dev = DeviceArray::from_host(stream, &host)?;
    let mut out = Array2::<f32>::zeros((5, 3));
    dev.copy_to_host(&mut out.view_mut().reversed_axes())?;
    assert_eq!(out, host.t());
    Ok(())
}

fn async_transfers_with_the_arrays_stream(stream: &Arc<CudaStream>) -> Res {
    let host = host2(8, 8);
    let mut dev = DeviceArray::<f32, _>::zeros(stream, (8, 8))?;
    dev.copy_from_host_async(&host)?.wait()?;
    let mut back = Array2::<f32>::zeros((8, 8));
    dev.copy_to_host_async(&mut back)?.wait()?;
    assert_eq!(back, host);
    Ok(())
}

fn split_a_mutable_view_and_fill_the_halves(stream: &Arc<CudaStream>) -> Res {
    let mut dev = DeviceArray::<i16, _>::zeros(stream, (4, 6))?;
    let (mut left, mut right) = dev.view_mut().split_at(Axis(1), 2);
    left.fill(1)?;
    right.fill(2)?;
    let h = dev.to_host()?;
    assert_eq!(h.slice(s![.., ..2]).sum(), 8);
    assert_eq!(h.slice(s![.., 2..]).sum(), 32);
    Ok(())
}

fn rows_in_a_loop(stream: &Arc<CudaStream>) -> Res {
    let host = host2(3, 4);
    let dev = DeviceArray::from_host(stream, &host)?;
    for (i, row) in host.rows().into_iter().enumerate() {
        assert_eq!(dev.index_axis(Axis(0), i).to_host()?, row);
    }
    Ok(())
}

fn generic_over_arrays_and_views(stream: &Arc<CudaStream>) -> Res {
    fn total<S: SpanData<Elem = f32>, D: Dimension>(a: &DeviceBase<S, D>) -> devspan::Result<f32> {
        Ok(a.to_host()?.sum())
    }
    let host = host2(2, 2);
    let dev = DeviceArray::from_host(stream, &host)?;
    assert_eq!(total(&dev)?, host.sum());
    assert_eq!(total(&dev.slice(s![.., 0]))?, host.column(0).sum());
    Ok(())
}

fn return_a_view_from_a_function(stream: &Arc<CudaStream>) -> Res {
    fn first_row(a: &DeviceArray<f32, Ix2>) -> DeviceView<'_, f32, Ix1> {
        a.index_axis(Axis(0), 0)
    }
    let host = host2(3, 2);
    let dev = DeviceArray::from_host(stream, &host)?;
    assert_eq!(first_row(&dev).to_host()?, host.row(0));
    Ok(())
}

fn sub_views_of_a_view_keep_its_lifetime(stream: &Arc<CudaStream>) -> Res {
    fn corner<'a>(v: &DeviceView<'a, f32, Ix2>) -> DeviceView<'a, f32, Ix2> {
        v.slice(s![..2, ..2])
    }
    let host = host2(4, 4);
    let dev = DeviceArray::from_host(stream, &host)?;
    let c = corner(&dev.view());
    assert_eq!(c.to_host()?, host.slice(s![..2, ..2]));
    Ok(())
}

fn static_views_over_foreign_memory_give_static_slices(stream: &Arc<CudaStream>) -> Res {
    let slice = stream.clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    let ptr = devspan::interop::cuda_slice_address(&slice);
    // SAFETY: the slice holds 6 f32 at `ptr` and is moved into the owner.
    let v = unsafe {
        DeviceView::<f32, _>::from_raw_parts(ptr, 6, Ix2(2, 3), &[3, 1], 0, 0, Arc::new(slice))?
    };
    let col: DeviceView<'static, f32, Ix1> = v.slice(s![.., 1]);
    drop(v);
    assert_eq!(col.to_host_on(stream)?, ndarray::arr1(&[2.0, 5.0]));
    let e = col.to_host().unwrap_err();
    assert!(e.to_string().contains("to_host_on"));
    Ok(())
}

fn assert_close_on_an_array(stream: &Arc<CudaStream>) -> Res {
    let host = Array3::from_shape_fn((2, 3, 4), |(i, j, k)| (i + j * k) as f64 * 0.1 + 0.01);
    let dev = DeviceArray::from_host(stream, &host)?;
    assert_close(&dev, &host, Tolerance::exact());
    assert_close(
        &dev.slice(s![.., 1, ..;-1]),
        &host.slice(s![.., 1, ..;-1]),
        Tolerance::exact(),
    );
    Ok(())
}

fn layouts_of_arrays(stream: &Arc<CudaStream>) -> Res {
    let a = DeviceArray::<u8, _>::zeros(stream, (3, 4, 5))?;
    assert!(a.is_standard_layout());
    assert!(a.t().is_fortran_layout());
    assert!(a.view().permuted_axes([2, 0, 1]).is_dense());
    assert_eq!(a.view().into_dyn().ndim(), 3);
    Ok(())
}

fn a_users_kernel_argument_from_an_array(stream: &Arc<CudaStream>) -> Res {
    let mut a = DeviceArray::<f32, _>::zeros(stream, (4, 6))?;
    let kv = a.slice(s![.., ..;-2]).kernel_view::<2>()?;
    assert_eq!((kv.shape, kv.strides), ([4, 3], [6, -2]));
    let ptr = a.with_kernel_view_mut::<2, _>(stream, |kv| Ok(kv.ptr))?;
    assert_eq!(ptr, a.device_ptr());
    Ok(())
}

fn collect_host_results(stream: &Arc<CudaStream>) -> Res {
    let a = DeviceArray::from_host(stream, &Array::range(0.0f32, 10.0, 1.0))?;
    let h: Vec<f32> = a.slice(s![..;3]).to_host()?.to_vec();
    assert_eq!(h, vec![0.0, 3.0, 6.0, 9.0]);
    Ok(())
}

type Snippet = fn(&Arc<CudaStream>) -> Res;

fn ones_from_elem_and_to_owned(stream: &Arc<CudaStream>) -> Res {
    let ones = DeviceArray::<f16, _>::ones(stream, (3, 5))?;
    assert_eq!(
        ones.to_host()?,
        Array2::from_elem((3, 5), f16::from_f32(1.0))
    );
    let sevens = DeviceArray::from_elem(stream, (2, 0, 4), 7i64)?;
    assert_eq!(sevens.shape(), &[2, 0, 4]);
    let nines = DeviceArray::from_elem(stream, 1000, 9u8)?;
    assert_eq!(nines.to_host()?, Array1::from_elem(1000, 9u8));
    // `to_owned` of a view is a device copy the caller owns, as in ndarray.
    let host = host2(4, 6);
    let dev = DeviceArray::from_host(stream, &host)?;
    let copy: DeviceArray<f32, Ix2> = dev.slice(s![1.., ..;-2]).t().to_owned()?;
    assert_eq!(copy.to_host()?, host.slice(s![1.., ..;-2]).t().to_owned());
    Ok(())
}

fn rows_columns_and_axis_iterators(stream: &Arc<CudaStream>) -> Res {
    let host = host2(4, 6);
    let mut dev = DeviceArray::from_host(stream, &host)?;
    assert_eq!(dev.row(2).to_host()?, host.row(2));
    assert_eq!(dev.column(5).to_host()?, host.column(5));
    for (dev_row, host_row) in dev.outer_iter().zip(host.outer_iter()) {
        assert_eq!(dev_row.to_host()?, host_row);
    }
    for (chunk, host_chunk) in dev
        .axis_chunks_iter(Axis(1), 4)
        .zip(host.axis_chunks_iter(Axis(1), 4))
    {
        assert_eq!(chunk.to_host()?, host_chunk);
    }
    let mut expect = host.clone();
    for (j, mut column) in dev.axis_iter_mut(Axis(1)).enumerate() {
        column.fill_on(stream, j as f32)?;
    }
    for (j, mut column) in expect.axis_iter_mut(Axis(1)).enumerate() {
        column.fill(j as f32);
    }
    dev.row_mut(1).fill_on(stream, -1.0)?;
    expect.row_mut(1).fill(-1.0);
    dev.column_mut(0).fill_on(stream, -2.0)?;
    expect.column_mut(0).fill(-2.0);
    assert_eq!(dev.to_host()?, expect);
    assert_eq!((dev.len_of(Axis(1)), dev.raw_dim()), (6, expect.raw_dim()));
    Ok(())
}

const SNIPPETS: &[(&str, Snippet)] = &[
    ("from_host_owned_array", from_host_owned_array),
    ("ones_from_elem_and_to_owned", ones_from_elem_and_to_owned),
    (
        "rows_columns_and_axis_iterators",
        rows_columns_and_axis_iterators,
    ),
    (
        "from_host_view_and_transposed_view",
        from_host_view_and_transposed_view,
    ),
    ("from_host_arc_and_cow", from_host_arc_and_cow),
    ("slice_then_use_the_parent", slice_then_use_the_parent),
    (
        "slice_mut_then_use_the_parent",
        slice_mut_then_use_the_parent,
    ),
    (
        "named_mutable_view_then_the_parent",
        named_mutable_view_then_the_parent,
    ),
    ("transpose_an_array_directly", transpose_an_array_directly),
    ("chain_slice_t_cast", chain_slice_t_cast),
    (
        "chain_slice_move_index_axis_move",
        chain_slice_move_index_axis_move,
    ),
    (
        "owned_array_layout_ops_consume",
        owned_array_layout_ops_consume,
    ),
    ("fill_on_the_arrays_stream", fill_on_the_arrays_stream),
    ("fill_on_another_stream", fill_on_another_stream),
    ("cast_to_f16", cast_to_f16),
    ("clone_an_array", clone_an_array),
    (
        "print_an_array_as_ndarray_does",
        print_an_array_as_ndarray_does,
    ),
    (
        "print_a_large_array_summarised",
        print_a_large_array_summarised,
    ),
    ("debug_print", debug_print),
    (
        "question_mark_on_devspan_errors",
        question_mark_on_devspan_errors,
    ),
    ("assign_broadcast_row", assign_broadcast_row),
    ("assign_a_transposed_array", assign_a_transposed_array),
    ("assign_cast_from_an_array", assign_cast_from_an_array),
    ("to_shape_view_or_copy", to_shape_view_or_copy),
    (
        "into_shape_with_order_on_an_array",
        into_shape_with_order_on_an_array,
    ),
    ("broadcast_an_array", broadcast_an_array),
    ("copy_from_host_into_a_slice", copy_from_host_into_a_slice),
    (
        "copy_to_host_into_a_transposed_host_view",
        copy_to_host_into_a_transposed_host_view,
    ),
    (
        "async_transfers_with_the_arrays_stream",
        async_transfers_with_the_arrays_stream,
    ),
    (
        "split_a_mutable_view_and_fill_the_halves",
        split_a_mutable_view_and_fill_the_halves,
    ),
    ("rows_in_a_loop", rows_in_a_loop),
    (
        "generic_over_arrays_and_views",
        generic_over_arrays_and_views,
    ),
    (
        "return_a_view_from_a_function",
        return_a_view_from_a_function,
    ),
    (
        "sub_views_of_a_view_keep_its_lifetime",
        sub_views_of_a_view_keep_its_lifetime,
    ),
    (
        "static_views_over_foreign_memory_give_static_slices",
        static_views_over_foreign_memory_give_static_slices,
    ),
    ("assert_close_on_an_array", assert_close_on_an_array),
    ("layouts_of_arrays", layouts_of_arrays),
    (
        "a_users_kernel_argument_from_an_array",
        a_users_kernel_argument_from_an_array,
    ),
    ("collect_host_results", collect_host_results),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn natural_user_code_runs_and_matches_ndarray() {
    let stream = gpu_stream();
    let mut failed = Vec::new();
    for (name, f) in SNIPPETS {
        if let Err(e) = f(&stream) {
            failed.push(format!("{name}: {e}"));
        }
    }
    assert!(failed.is_empty(), "snippets failed:\n{}", failed.join("\n"));
    println!(
        "{} ergonomics snippets ran and matched ndarray",
        SNIPPETS.len()
    );
}
