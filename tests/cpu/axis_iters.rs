//! The everyday ndarray accessors on views, which need no GPU: `len_of`, `raw_dim`, `row`,
//! `column` (and `_mut`), and the iterators `outer_iter`, `axis_iter`, `axis_iter_mut` and
//! `axis_chunks_iter`, checked against `index_axis` / `slice_axis` and against ndarray's own
//! iterators on a host array of the same layout.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use devspan::{DeviceBase, DeviceOwner, DeviceView, DeviceViewMut, SpanData};
use ndarray::{Array3, Axis, Dimension, Ix1, Ix2, Ix3, Slice, s};

struct Counted(Arc<AtomicUsize>);

impl DeviceOwner for Counted {
    fn describe(&self) -> String {
        "counted test owner".into()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A device address that is never dereferenced: these tests touch metadata only.
const FAKE_PTR: u64 = 0x7f00_0000_0000;

/// A 4 x 5 x 6 f32 view over 120 elements, sliced and reversed so that every axis has its own
/// stride and the offset is not 0, and the host array of element indices with the same layout.
fn view_and_indices() -> (
    DeviceView<'static, f32, Ix3>,
    ndarray::Array3<isize>,
    Arc<AtomicUsize>,
) {
    let drops = Arc::new(AtomicUsize::new(0));
    let o: Arc<dyn DeviceOwner> = Arc::new(Counted(drops.clone()));
    // SAFETY: the views below are never used by a device operation; only metadata is read.
    let v = unsafe {
        DeviceView::<f32, _>::from_raw_parts(FAKE_PTR, 240, Ix3(4, 6, 10), &[60, 10, 1], 0, 0, o)
            .unwrap()
    };
    let v = v.slice_move(s![..;-1, 1.., ..;2]);
    let idx = Array3::from_shape_fn((4, 6, 10), |(i, j, k)| (i * 60 + j * 10 + k) as isize);
    let idx = idx.slice_move(s![..;-1, 1.., ..;2]);
    (v, idx, drops)
}

/// A view's element zero as an element index from FAKE_PTR, its shape, and its strides with
/// those of axes of length 1 as 0 (devspan keeps them so; ndarray keeps them as they were).
fn meta<S: SpanData, D: Dimension>(v: &DeviceBase<S, D>) -> (isize, Vec<usize>, Vec<isize>) {
    let size = std::mem::size_of::<S::Elem>() as i64;
    let first = (v.device_ptr() as i64 - FAKE_PTR as i64) / size;
    (
        first as isize,
        v.shape().to_vec(),
        unit_strides(v.shape(), v.strides()),
    )
}

/// The same for a host view of element indices.
fn host_meta<D: Dimension>(
    a: &ndarray::ArrayView<'_, isize, D>,
) -> (isize, Vec<usize>, Vec<isize>) {
    let first = if a.is_empty() { 0 } else { *a.first().unwrap() };
    (
        first,
        a.shape().to_vec(),
        unit_strides(a.shape(), a.strides()),
    )
}

fn unit_strides(shape: &[usize], strides: &[isize]) -> Vec<isize> {
    shape
        .iter()
        .zip(strides)
        .map(|(&n, &s)| if n == 1 { 0 } else { s })
        .collect()
}

#[test]
fn len_of_and_raw_dim_follow_the_shape() {
    let (v, idx, _) = view_and_indices();
    assert_eq!(v.raw_dim(), Ix3(4, 5, 5));
    for k in 0..3 {
        assert_eq!(v.len_of(Axis(k)), idx.len_of(Axis(k)));
    }
}

#[test]
fn axis_iter_matches_index_axis_and_ndarray_on_every_axis() {
    let (v, idx, _) = view_and_indices();
    for k in 0..3 {
        let axis = Axis(k);
        let items: Vec<_> = v.axis_iter(axis).collect();
        assert_eq!(items.len(), v.len_of(axis));
        assert_eq!(v.axis_iter(axis).len(), v.len_of(axis));
        for ((i, item), host) in items.iter().enumerate().zip(idx.axis_iter(axis)) {
            assert_eq!(
                meta(item),
                meta(&v.index_axis(axis, i)),
                "axis {k}, index {i}"
            );
            assert_eq!(meta(item), host_meta(&host), "axis {k}, index {i}");
        }
        let back: Vec<_> = v.axis_iter(axis).rev().map(|x| meta(&x)).collect();
        let fwd: Vec<_> = items.iter().rev().map(meta).collect();
        assert_eq!(back, fwd, "axis {k} reversed");
    }
    let outer: Vec<_> = v.outer_iter().map(|x| meta(&x)).collect();
    let axis0: Vec<_> = v.axis_iter(Axis(0)).map(|x| meta(&x)).collect();
    assert_eq!(outer, axis0);
}

#[test]
fn axis_chunks_iter_matches_slice_axis_and_ndarray() {
    let (v, idx, _) = view_and_indices();
    for k in 0..3 {
        let axis = Axis(k);
        for size in 1..=7 {
            let got: Vec<_> = v.axis_chunks_iter(axis, size).map(|c| meta(&c)).collect();
            let host: Vec<_> = idx
                .axis_chunks_iter(axis, size)
                .map(|c| host_meta(&c))
                .collect();
            assert_eq!(got, host, "axis {k}, size {size}");
            assert_eq!(v.axis_chunks_iter(axis, size).len(), host.len());
            let len = v.len_of(axis);
            let sliced: Vec<_> = (0..len)
                .step_by(size)
                .map(|s0| meta(&v.slice_axis(axis, Slice::from(s0..(s0 + size).min(len)))))
                .collect();
            assert_eq!(got, sliced, "axis {k}, size {size}");
        }
    }
}

#[test]
fn axis_iter_mut_yields_the_same_disjoint_sub_views() {
    let drops = Arc::new(AtomicUsize::new(0));
    let o: Arc<dyn DeviceOwner> = Arc::new(Counted(drops.clone()));
    // SAFETY: as above: metadata only.
    let mut v = unsafe {
        DeviceViewMut::<u16, _>::from_raw_parts_mut(
            FAKE_PTR,
            60,
            Ix3(3, 4, 5),
            &[20, 5, 1],
            0,
            0,
            o,
        )
        .unwrap()
    };
    let idx = Array3::from_shape_fn((3, 4, 5), |(i, j, k)| (i * 20 + j * 5 + k) as isize);
    for k in 0..3 {
        let axis = Axis(k);
        let expected: Vec<_> = v.view().axis_iter(axis).map(|x| meta(&x)).collect();
        let it = v.axis_iter_mut(axis);
        assert_eq!(it.len(), idx.len_of(axis));
        let got: Vec<_> = it.map(|x| meta(&x)).collect();
        assert_eq!(got, expected, "axis {k}");
        let host: Vec<_> = idx.axis_iter(axis).map(|h| host_meta(&h)).collect();
        assert_eq!(got, host, "axis {k}");
    }
    // Every element belongs to exactly one item along each axis: their index sets partition
    // the view.
    let mut seen = vec![0u8; 60];
    for item in v.axis_iter_mut(Axis(1)) {
        let (first, shape, strides) = meta(&item);
        for a in 0..shape[0] {
            for b in 0..shape[1] {
                seen[(first + a as isize * strides[0] + b as isize * strides[1]) as usize] += 1;
            }
        }
    }
    assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
    drop(v);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn rows_and_columns_are_index_axis_of_2d_views() {
    let (v, _, _) = view_and_indices();
    let m = v.index_axis_move(Axis(2), 1);
    for i in 0..m.len_of(Axis(0)) {
        assert_eq!(meta(&m.row(i)), meta(&m.index_axis(Axis(0), i)));
    }
    for j in 0..m.len_of(Axis(1)) {
        assert_eq!(meta(&m.column(j)), meta(&m.index_axis(Axis(1), j)));
    }
    let o: Arc<dyn DeviceOwner> = Arc::new(Counted(Arc::new(AtomicUsize::new(0))));
    // SAFETY: as above: metadata only.
    let mut w = unsafe {
        DeviceViewMut::<f32, _>::from_raw_parts_mut(FAKE_PTR, 12, Ix2(3, 4), &[4, 1], 0, 0, o)
            .unwrap()
    };
    assert_eq!(meta(&w.row_mut(2)), (8, vec![4], vec![1]));
    assert_eq!(meta(&w.column_mut(3)), (3, vec![3], vec![4]));
    let _: DeviceViewMut<'_, f32, Ix1> = w.row_mut(0);
}

#[test]
fn items_share_the_owner_which_is_dropped_once_after_the_view() {
    let (v, _, drops) = view_and_indices();
    let items: Vec<_> = v.axis_iter(Axis(1)).collect();
    let chunks: Vec<_> = v.axis_chunks_iter(Axis(0), 3).collect();
    drop(items);
    drop(chunks);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(v);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn empty_axes_yield_nothing_and_bad_arguments_panic() {
    let (v, _, _) = view_and_indices();
    let e = v.slice(s![.., 0..0, ..]);
    assert_eq!(e.axis_iter(Axis(1)).count(), 0);
    assert_eq!(e.axis_chunks_iter(Axis(1), 2).count(), 0);
    assert_eq!(e.axis_iter(Axis(0)).count(), 4);
    let v = std::panic::AssertUnwindSafe(v);
    let axis = std::panic::catch_unwind(|| v.axis_iter(Axis(3)).count());
    assert!(axis.is_err());
    let zero = std::panic::catch_unwind(|| v.axis_chunks_iter(Axis(0), 0).count());
    assert!(zero.is_err());
}
