//! GPU tests of DLPack round trips through devspan itself: memory exported by devspan
//! (versioned and legacy managed tensors), imported again, written through, and released
//! exactly once. Marked `#[ignore]`: run with `--include-ignored` on a GPU machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::CudaSlice;
use devspan::dlpack::DlpackTensor;
use devspan::testing::gpu_stream;
use devspan::{DeviceArray, DeviceElement, DeviceOwner, DeviceViewMut, ErrorKind};
use half::{bf16, f16};
use ndarray::{Array, ArrayD, IxDyn, s};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{bits, gpu_shared, random};

/// Device memory whose release is counted.
struct Counted<T> {
    slice: CudaSlice<T>,
    dropped: Arc<AtomicUsize>,
}

impl<T: Send + Sync + 'static> DeviceOwner for Counted<T> {}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// A `'static` writable view of shape `shape` over a counted copy of `host`, plus the owner
/// handle (to read the memory back) and the drop counter.
fn counted_view<T: DeviceElement>(
    stream: &Arc<cudarc::driver::CudaStream>,
    host: &ArrayD<T>,
) -> (
    DeviceViewMut<'static, T, IxDyn>,
    Arc<Counted<T>>,
    Arc<AtomicUsize>,
) {
    let dropped = Arc::new(AtomicUsize::new(0));
    let slice = stream
        .clone_htod(host.as_slice().expect("standard layout"))
        .unwrap();
    let ptr = devspan::interop::cuda_slice_address(&slice);
    let owner = Arc::new(Counted {
        slice,
        dropped: dropped.clone(),
    });
    let strides = devspan::Layout::contiguous(host.raw_dim())
        .strides()
        .to_vec();
    // SAFETY: `owner` holds `host.len()` elements of `T` at `ptr` on device 0, complete once the
    // stream is synchronised below; this view is the only writer.
    let view = unsafe {
        DeviceViewMut::from_raw_parts_mut(
            ptr,
            host.len(),
            host.raw_dim(),
            &strides,
            0,
            0,
            owner.clone(),
        )
    }
    .unwrap();
    stream.synchronize().unwrap();
    (view, owner, dropped)
}

fn read_owner<T: DeviceElement>(
    stream: &Arc<cudarc::driver::CudaStream>,
    owner: &Counted<T>,
    shape: &[usize],
) -> ArrayD<T> {
    let v = stream.clone_dtoh(&owner.slice).unwrap();
    Array::from_shape_vec(IxDyn(shape), v).unwrap()
}

fn round_trip_and_write<T: DeviceElement>(rng: &mut StdRng, legacy: bool) {
    let stream = gpu_stream();
    let shape = [7usize, 33, 12];
    let host = random::<T>(rng, &shape);
    let (view, owner, dropped) = counted_view(&stream, &host);
    // A non-contiguous, negatively strided, transposed region.
    let region = view.slice_move(s![1..6;2, ..;-3, 2..]).into_dyn();
    let region = region.permuted_axes(IxDyn(&[2, 0, 1]));
    // SAFETY: each pointer is a fresh managed tensor from `into_dlpack*`, handed over once.
    let t = unsafe {
        if legacy {
            DlpackTensor::from_legacy(region.into_dlpack_legacy())
        } else {
            DlpackTensor::from_versioned(region.into_dlpack())
        }
    }
    .unwrap();
    assert!(!t.is_read_only());
    assert_eq!(t.dtype().unwrap(), T::DTYPE);
    let mut imported = t.into_view_mut::<T, IxDyn>().unwrap();
    let expect = host
        .slice(s![1..6;2, ..;-3, 2..])
        .permuted_axes([2, 0, 1])
        .to_owned()
        .into_dyn();
    assert_eq!(imported.shape(), expect.shape());
    assert_eq!(
        bits(&imported.view().to_host_on(&stream).unwrap()),
        bits(&expect),
        "{} read through the import",
        T::DTYPE
    );

    // Writes through the imported view land in the exporter's memory, and only there.
    let src = random::<T>(rng, expect.shape());
    let dev_src = DeviceArray::from_host(&stream, &src.view()).unwrap();
    imported.assign_on(&stream, &dev_src.view()).unwrap();
    let mut after = host.clone();
    after
        .slice_mut(s![1..6;2, ..;-3, 2..])
        .permuted_axes([2, 0, 1])
        .into_dyn()
        .assign(&src);
    stream.synchronize().unwrap();
    assert_eq!(bits(&read_owner(&stream, &owner, &shape)), bits(&after));

    // A sub-view outlives the view it came from; the owner is released once, after the last.
    let sub = imported
        .into_view()
        .slice_move(s![1.., 0, ..;-1])
        .into_dyn();
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    let expect_sub = after
        .slice(s![1..6;2, ..;-3, 2..])
        .permuted_axes([2, 0, 1])
        .slice_move(s![1.., 0, ..;-1])
        .to_owned()
        .into_dyn();
    assert_eq!(
        bits(&sub.to_host_on(&stream).unwrap()),
        bits(&expect_sub),
        "sub-view"
    );
    drop(owner);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        0,
        "the import keeps the owner alive"
    );
    // The last view is dropped on another thread; the deleter runs there.
    std::thread::spawn(move || drop(sub)).join().unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn versioned_round_trip_every_dtype() {
    let _gpu = gpu_shared();
    let mut rng = StdRng::seed_from_u64(0xd1_9ac4);
    round_trip_and_write::<u8>(&mut rng, false);
    round_trip_and_write::<i8>(&mut rng, false);
    round_trip_and_write::<u16>(&mut rng, false);
    round_trip_and_write::<i16>(&mut rng, false);
    round_trip_and_write::<u32>(&mut rng, false);
    round_trip_and_write::<i32>(&mut rng, false);
    round_trip_and_write::<u64>(&mut rng, false);
    round_trip_and_write::<i64>(&mut rng, false);
    round_trip_and_write::<f16>(&mut rng, false);
    round_trip_and_write::<bf16>(&mut rng, false);
    round_trip_and_write::<f32>(&mut rng, false);
    round_trip_and_write::<f64>(&mut rng, false);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn legacy_round_trip() {
    let _gpu = gpu_shared();
    let mut rng = StdRng::seed_from_u64(0x1e_9ac4);
    round_trip_and_write::<f32>(&mut rng, true);
    round_trip_and_write::<u8>(&mut rng, true);
    round_trip_and_write::<bf16>(&mut rng, true);
    round_trip_and_write::<i64>(&mut rng, true);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn read_only_export_imports_read_only() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(7);
    let host = random::<f32>(&mut rng, &[64, 48]);
    let (view, _owner, dropped) = counted_view(&stream, &host);
    let ro = view.into_view().slice_move(s![..;-1, 5..]).into_dyn();
    let ro2 = ro.clone();
    // SAFETY: fresh managed tensors from `into_dlpack`, each handed over once.
    let t = unsafe { DlpackTensor::from_versioned(ro.into_dlpack()) }.unwrap();
    assert!(t.is_read_only());
    let e = t.into_view_mut::<f32, IxDyn>().unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
    let t = unsafe { DlpackTensor::from_versioned(ro2.into_dlpack()) }.unwrap();
    let v = t.into_view::<f32, IxDyn>().unwrap();
    let expect = host.slice(s![..;-1, 5..]).to_owned().into_dyn();
    assert_eq!(bits(&v.to_host_on(&stream).unwrap()), bits(&expect));
    drop(_owner);
    drop(v);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn exported_array_is_freed_by_the_import() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(11);
    for legacy in [false, true] {
        let host = random::<i32>(&mut rng, &[300, 17]);
        let a = DeviceArray::from_host(&stream, &host.view()).unwrap();
        // SAFETY: fresh managed tensors, handed over once.
        let t = unsafe {
            if legacy {
                DlpackTensor::from_legacy(a.into_dlpack_legacy().unwrap())
            } else {
                DlpackTensor::from_versioned(a.into_dlpack().unwrap())
            }
        }
        .unwrap();
        let mut v = t.into_view_mut::<i32, IxDyn>().unwrap();
        assert_eq!(v.view().to_host_on(&stream).unwrap(), host);
        v.slice_mut(s![.., ..;4]).fill_on(&stream, -9).unwrap();
        let mut expect = host.clone();
        expect.slice_mut(s![.., ..;4]).fill(-9);
        assert_eq!(v.view().to_host_on(&stream).unwrap(), expect);
        // Wrong element type or rank: Err, and the tensor is still released.
        let again = DeviceArray::from_host(&stream, &host.view()).unwrap();
        // SAFETY: as above.
        let t2 = unsafe { DlpackTensor::from_versioned(again.into_dlpack().unwrap()) }.unwrap();
        assert_eq!(
            t2.into_view::<f32, ndarray::Ix2>().unwrap_err().kind(),
            &ErrorKind::UnsupportedDtype
        );
    }
    stream.synchronize().unwrap();
}
