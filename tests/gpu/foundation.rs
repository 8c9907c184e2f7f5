//! GPU tests of the foundation: round trips, keep-alives, allocator lifetime. Marked `#[ignore]`
//! so that machines without a GPU report them as ignored; the GPU runner passes
//! `--include-ignored` with `DEVSPAN_REQUIRE_GPU=1`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::CudaSlice;
use devspan::testing::gpu_stream;
use devspan::{DeviceArray, DeviceElement, DeviceOwner, DeviceSpan, DeviceView, interop};
use half::{bf16, f16};
use ndarray::{Array, ArrayD, IxDyn, s};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{gpu_shared, random};

fn bits_equal<T: DeviceElement>(a: &ArrayD<T>, b: &ArrayD<T>) -> bool {
    a.shape() == b.shape()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| bytemuck::bytes_of(x) == bytemuck::bytes_of(y))
}

fn round_trip<T: DeviceElement>(rng: &mut StdRng) {
    let stream = gpu_stream();
    for shape in [
        vec![],
        vec![0],
        vec![1],
        vec![7],
        vec![3, 0, 2],
        vec![5, 1, 3],
        vec![17, 33],
        vec![2, 3, 4, 5, 6],
    ] {
        let host = random::<T>(rng, &shape);
        let dev = DeviceArray::from_host(&stream, &host.view()).unwrap();
        assert_eq!(dev.shape(), host.shape());
        let back = dev.to_host_on(&stream).unwrap();
        assert!(bits_equal(&back, &host), "{} {shape:?}", T::DTYPE);
        // A non-standard host layout goes up too.
        let t = host.t();
        let dev_t = DeviceArray::from_host(&stream, &t).unwrap();
        assert!(
            bits_equal(&dev_t.to_host_on(&stream).unwrap(), &t.to_owned()),
            "{} {shape:?} transposed",
            T::DTYPE
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn round_trips_every_element_type() {
    let _gpu = gpu_shared();
    let mut rng = StdRng::seed_from_u64(0xD5);
    round_trip::<u8>(&mut rng);
    round_trip::<i8>(&mut rng);
    round_trip::<u16>(&mut rng);
    round_trip::<i16>(&mut rng);
    round_trip::<u32>(&mut rng);
    round_trip::<i32>(&mut rng);
    round_trip::<u64>(&mut rng);
    round_trip::<i64>(&mut rng);
    round_trip::<f16>(&mut rng);
    round_trip::<bf16>(&mut rng);
    round_trip::<f32>(&mut rng);
    round_trip::<f64>(&mut rng);
}

/// Drops every user handle to the context and stream before the buffer: the buffer's own
/// `Arc`s keep what its free needs alive.
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffer_outlives_every_user_handle_to_context_and_stream() {
    let _gpu = gpu_shared();
    let mut rng = StdRng::seed_from_u64(7);
    let host = random::<f32>(&mut rng, &[256, 256]);
    let dev = {
        let ctx = devspan::context(0).unwrap();
        let stream = ctx.new_stream().unwrap();
        let dev = DeviceArray::from_host(&stream, &host.view()).unwrap();
        drop(stream);
        drop(ctx);
        dev
    };
    // The array still works through its own stream (the plain methods use it), then frees
    // itself on drop.
    let back = dev.to_host().unwrap();
    assert!(bits_equal(&back, &host));
    let copy = dev.t().to_contiguous().unwrap();
    drop(dev);
    assert!(bits_equal(&copy.to_host().unwrap(), &host.t().to_owned()));
    drop(copy);
    // A fresh context handle still works afterwards.
    let s2 = gpu_stream();
    s2.synchronize().unwrap();
}

struct CountedSlice {
    _slice: CudaSlice<u32>,
    drops: Arc<AtomicUsize>,
}
impl DeviceOwner for CountedSlice {}
impl Drop for CountedSlice {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A custom owner holding real device memory: freed exactly once, after the last view, and the
/// views read correct data until then, also from another thread.
#[test]
#[ignore = "needs a CUDA GPU"]
fn custom_owner_freed_once_after_last_view() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let data: Vec<u32> = (0..1000).collect();
    let slice = stream.clone_htod(&data).unwrap();
    let ptr = interop::cuda_slice_address(&slice);
    let drops = Arc::new(AtomicUsize::new(0));
    let owner: Arc<dyn DeviceOwner> = Arc::new(CountedSlice {
        _slice: slice,
        drops: drops.clone(),
    });
    // SAFETY: the owner holds the 1000 u32 at `ptr`, which nothing else writes.
    let v = unsafe {
        DeviceView::<u32, _>::from_raw_parts(ptr, 1000, IxDyn(&[10, 100]), &[100, 1], 0, 0, owner)
            .unwrap()
    };
    let a = v.slice(s![2..4, ..;-10]);
    drop(v);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    let handle = std::thread::spawn(move || {
        let stream = gpu_stream();
        let h = a.to_host_on(&stream).unwrap();
        drop(a);
        h
    });
    let h = handle.join().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let expect = Array::from_shape_fn((2, 10), |(i, j)| ((i + 2) * 100 + 99 - 10 * j) as u32);
    assert_eq!(h, expect);
}

/// Views over cudarc slices and cudarc's own views.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cudarc_interop_views() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let data: Vec<i16> = (0..120).map(|x| x as i16 - 60).collect();
    let slice = stream.clone_htod(&data).unwrap();
    let v = interop::view_of(&slice, (4, 5, 6)).unwrap();
    let host = Array::from_shape_vec((4, 5, 6), data.clone()).unwrap();
    assert_eq!(v.to_host_on(&stream).unwrap(), host);
    let sub = DeviceSpan::from_cuda_view(slice.slice(30..90))
        .into_view()
        .into_shape_with_order((2, 5, 6))
        .unwrap();
    assert_eq!(
        sub.to_host_on(&stream).unwrap(),
        host.slice(s![1..3, .., ..])
    );
    let mut out = stream.alloc_zeros::<i16>(120).unwrap();
    {
        let mut o = interop::view_mut_of(&mut out, (6, 5, 4)).unwrap();
        o.assign_on(&stream, &v.clone().permuted_axes([2, 1, 0]))
            .unwrap();
    }
    let got = stream.clone_dtoh(&out).unwrap();
    let expect: Vec<i16> = host
        .view()
        .permuted_axes([2, 1, 0])
        .iter()
        .copied()
        .collect();
    assert_eq!(got, expect);
}

/// Handles of cudarc memory learn its address on first use (making them enqueues nothing):
/// their addresses are right whether asked for before any operation or after one that learnt
/// it, for sub-views at offsets, cudarc views, and arrays; and operations whose first use
/// learns it write the right elements.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cudarc_handles_learn_their_address_on_first_use() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let poison = 0xDEAD_BEEFu32;
    let mut slice = stream.clone_htod(&vec![poison; 100]).unwrap();
    let base = interop::cuda_slice_address(&slice);
    // Asked for before any operation.
    {
        let v = DeviceView::from(&slice);
        assert_eq!(v.slice(s![10..]).device_ptr(), base + 40);
        let cv = DeviceSpan::from_cuda_view(slice.slice(30..90)).into_view();
        assert_eq!(cv.device_ptr(), base + 120);
        assert_eq!(cv.slice(s![..;-1]).device_ptr(), base + 4 * 89);
    }
    // Learnt by an operation on a sub-view: a fill of elements 20, 23, .., 47, then a copy
    // into 60..70 of elements 20..30 through a cudarc view, each a first use of its handle.
    {
        let mut v = devspan::DeviceViewMut::from(&mut slice);
        let mut sub = v.slice_mut(s![20..50;3]);
        sub.fill_on(&stream, 7).unwrap();
        assert_eq!(sub.device_ptr(), base + 80);
    }
    {
        let (lo, mut hi) = slice.split_at_mut(60);
        let src = DeviceSpan::from_cuda_view(lo.slice(20..30)).into_view();
        let mut dst =
            devspan::DeviceSpanMut::from_cuda_view_mut(hi.slice_mut(0..10)).into_view_mut();
        dst.assign_on(&stream, &src).unwrap();
        assert_eq!(dst.device_ptr(), base + 240);
        assert_eq!(src.device_ptr(), base + 80);
    }
    let got = stream.clone_dtoh(&slice).unwrap();
    let mut expect = vec![poison; 100];
    for i in (20..50).step_by(3) {
        expect[i] = 7;
    }
    for i in 0..10 {
        expect[60 + i] = expect[20 + i];
    }
    assert_eq!(got, expect);
    // Arrays: an operation on a sub-view first, then the address.
    let mut a = DeviceArray::<u32, _>::zeros(&stream, 64).unwrap();
    a.slice_mut(s![8..16]).fill(3).unwrap();
    assert_eq!(
        a.device_ptr(),
        interop::cuda_slice_address(a.as_cuda_slice())
    );
    let h = a.to_host().unwrap();
    assert!(
        h.iter()
            .enumerate()
            .all(|(i, &x)| x == if (8..16).contains(&i) { 3 } else { 0 })
    );
}

/// Two streams: a write on one, a read on another, ordered by cudarc's event tracking.
#[test]
#[ignore = "needs a CUDA GPU"]
fn multi_stream_ordering_through_cudarc_events() {
    let _gpu = gpu_shared();
    let ctx = devspan::context(0).unwrap();
    let s1 = ctx.new_stream().unwrap();
    let s2 = ctx.new_stream().unwrap();
    let n = 1 << 24;
    let mut a = s1.alloc_zeros::<f32>(n).unwrap();
    for round in 0..4 {
        let value = round as f32 + 0.5;
        devspan::DeviceSpanMut::from_cuda_mut(&mut a)
            .fill_on(&s1, value)
            .unwrap();
        let b = DeviceSpan::from_cuda(&a)
            .into_view()
            .cast_on::<f64>(&s2)
            .unwrap();
        let h = b.to_host_on(&s2).unwrap();
        assert!(
            h.iter().all(|&x| x == value as f64),
            "round {round}: stream 2 read before stream 1's fill finished"
        );
    }
}

/// Borrowed views carry no drop glue that needs their borrow: the array is usable again right
/// after a view's last use, with no block or `drop` to end the borrow (as with ndarray's views).
#[test]
#[ignore = "needs a CUDA GPU"]
fn borrowed_views_end_their_borrow_at_last_use() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut dev = DeviceArray::<f32, _>::zeros(&stream, (6, 4)).unwrap();
    let mut v = dev.view_mut();
    let mut sub = v.slice_mut(s![..;2, ..]);
    sub.fill_on(&stream, 1.5).unwrap();
    let h = dev.to_host_on(&stream).unwrap();
    let r = dev.view().slice(s![1.., ..]);
    let mut slice = stream.alloc_zeros::<f32>(8).unwrap();
    let mut w = devspan::DeviceViewMut::from(&mut slice);
    w.fill_on(&stream, 2.0).unwrap();
    let back = stream.clone_dtoh(&slice).unwrap();
    assert_eq!(r.shape(), &[5, 4]);
    assert!(
        h.outer_iter()
            .enumerate()
            .all(|(i, row)| row.iter().all(|&x| x == if i % 2 == 0 { 1.5 } else { 0.0 }))
    );
    assert_eq!(back, vec![2.0; 8]);
}

/// Host arguments of every kind: `Array`, views, `ArcArray` and `CowArray` in; `Array` and
/// views out; references compared with `assert_close` as they are.
#[test]
#[ignore = "needs a CUDA GPU"]
fn host_arguments_of_any_kind() {
    let _gpu = gpu_shared();
    use devspan::testing::{Tolerance, assert_close};
    let stream = gpu_stream();
    let host = Array::from_shape_fn((5, 7), |(i, j)| (i * 7 + j) as f32 + 0.5);
    let a = DeviceArray::from_host(&stream, &host).unwrap();
    let b = DeviceArray::from_host(&stream, &host.to_shared()).unwrap();
    let c = DeviceArray::from_host(&stream, &ndarray::CowArray::from(host.view())).unwrap();
    let d = DeviceArray::from_host(&stream, &host.t()).unwrap();
    for dev in [&a, &b, &c] {
        assert_close(dev, &host, Tolerance::exact());
    }
    assert_close(&d, &host.t(), Tolerance::exact());
    let mut out = Array::<f32, _>::from_elem((7, 5), -1.0);
    d.view().copy_to_host_on(&stream, &mut out).unwrap();
    assert_eq!(out, host.t());
    let mut e = DeviceArray::<f32, _>::zeros(&stream, (5, 7)).unwrap();
    e.view_mut()
        .copy_from_host_on(&stream, &host.to_shared())
        .unwrap();
    assert_eq!(e.to_host_on(&stream).unwrap(), host);
}
