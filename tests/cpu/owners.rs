//! Keep-alive rules that need no GPU: views over foreign memory hold their owner, which is
//! dropped exactly once, after the last view derived from it, on any thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use devspan::{
    DeviceBase, DeviceOwner, DeviceSpan, DeviceView, DeviceViewMut, ErrorKind, SpanData,
};
use ndarray::{Axis, Dimension, Ix1, Ix2, s};

struct Counted {
    drops: Arc<AtomicUsize>,
}

impl DeviceOwner for Counted {
    fn describe(&self) -> String {
        "counted test owner".into()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A device address that is never dereferenced: these tests touch metadata only.
const FAKE_PTR: u64 = 0x7f00_0000_0000;

fn owner() -> (Arc<dyn DeviceOwner>, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    (
        Arc::new(Counted {
            drops: drops.clone(),
        }),
        drops,
    )
}

#[test]
fn owner_is_dropped_once_after_the_last_view() {
    let (o, drops) = owner();
    // SAFETY: the views below are never used by a device operation; only metadata is read.
    let v = unsafe {
        DeviceView::<f32, _>::from_raw_parts(FAKE_PTR, 64, Ix2(8, 8), &[8, 1], 0, 0, o).unwrap()
    };
    let a = v.slice(s![1.., ..;2]);
    let b = v.t();
    let c = a.clone().reversed_axes();
    drop(v);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "a view still exists");
    drop(a);
    drop(b);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "c still exists");
    let d = std::thread::spawn(move || {
        let d = c.index_axis(Axis(0), 1);
        drop(c);
        d
    })
    .join()
    .unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 0, "d still exists");
    std::thread::spawn(move || drop(d)).join().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn rejected_raw_parts_drop_the_owner_once() {
    let (o, drops) = owner();
    // SAFETY: the constructor rejects the layout before anything could use the memory.
    let e =
        unsafe { DeviceView::<f32, _>::from_raw_parts(FAKE_PTR, 10, Ix2(4, 4), &[4, 1], 0, 0, o) }
            .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::OutOfBounds);
    assert!(e.to_string().contains("[4, 4]"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn raw_parts_are_validated() {
    type Case = (u64, usize, Vec<usize>, Vec<isize>, usize, ErrorKind);
    let cases: Vec<Case> = vec![
        (0, 4, vec![4], vec![1], 0, ErrorKind::InvalidArgument),
        (FAKE_PTR + 2, 4, vec![4], vec![1], 0, ErrorKind::Misaligned),
        (FAKE_PTR, 4, vec![4], vec![2], 0, ErrorKind::OutOfBounds),
        (FAKE_PTR, 4, vec![4], vec![-1], 0, ErrorKind::OutOfBounds),
        (
            FAKE_PTR,
            usize::MAX / 2,
            vec![4],
            vec![1],
            0,
            ErrorKind::Overflow,
        ),
        (
            FAKE_PTR,
            4,
            vec![usize::MAX, 2],
            vec![1, 1],
            0,
            ErrorKind::Overflow,
        ),
        (
            FAKE_PTR,
            4,
            vec![3, 3],
            vec![isize::MAX, 1],
            0,
            ErrorKind::Overflow,
        ),
        (
            FAKE_PTR,
            4,
            vec![2],
            vec![1, 1],
            0,
            ErrorKind::ShapeMismatch,
        ),
        (u64::MAX - 8, 4, vec![4], vec![1], 0, ErrorKind::Overflow),
    ];
    for (ptr, len, shape, strides, offset, kind) in cases {
        let (o, drops) = owner();
        // SAFETY: every case is rejected before the memory could be used.
        let r = unsafe {
            DeviceView::<f32, _>::from_raw_parts(
                ptr,
                len,
                ndarray::IxDyn(&shape),
                &strides,
                offset,
                0,
                o,
            )
        };
        let e = r.expect_err(&format!(
            "{ptr:x} {len} {shape:?} {strides:?} should be rejected"
        ));
        assert_eq!(e.kind(), &kind, "{shape:?} {strides:?}: {e}");
        assert!(!e.message().is_empty());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn writable_views_refuse_self_overlap() {
    for (shape, strides) in [
        (vec![4, 4], vec![0, 1]),
        (vec![4, 4], vec![2, 1]),
        (vec![3, 3], vec![1, 1]),
    ] {
        let (o, drops) = owner();
        // SAFETY: rejected before use.
        let e = unsafe {
            DeviceViewMut::<u8, _>::from_raw_parts_mut(
                FAKE_PTR,
                64,
                ndarray::IxDyn(&shape),
                &strides,
                0,
                0,
                o,
            )
        }
        .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Aliasing, "{shape:?} {strides:?}");
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn writable_splits_are_disjoint_and_keep_the_owner() {
    let (o, drops) = owner();
    // SAFETY: metadata only.
    let v = unsafe {
        DeviceViewMut::<u16, _>::from_raw_parts_mut(FAKE_PTR, 12, Ix1(12), &[1], 0, 0, o).unwrap()
    };
    let m = v.into_shape_with_order((3, 4)).unwrap();
    let (top, rest) = m.split_at(Axis(0), 1);
    // Each half's span holds its own elements only.
    assert_eq!(top.layout().reach(), Some((0, 3)));
    assert_eq!(rest.layout().reach(), Some((0, 7)));
    assert_eq!(rest.device_ptr(), FAKE_PTR + 2 * 4);
    assert_eq!(rest.span().unwrap().len(), 8);
    drop(top);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    let col = rest.slice_move(s![.., 2]);
    assert_eq!((col.shape(), col.strides()), (&[2usize][..], &[4isize][..]));
    drop(col);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn no_gpu_is_an_error_not_a_panic() {
    match devspan::context(0) {
        Ok(ctx) => println!("GPU present: {}", ctx.name().unwrap_or_default()),
        Err(e) => {
            assert_eq!(e.kind(), &ErrorKind::NoDevice, "{e}");
            assert!(devspan::default_stream(0).is_err());
            assert!(devspan::new_stream(0).is_err());
            assert!(!devspan::gpu_available());
        }
    }
    // An ordinal past the device count is an error on any machine.
    assert!(devspan::context(1 << 20).is_err());
}

#[test]
fn kernel_view_carries_pointer_shape_and_strides() {
    let (o, _drops) = owner();
    // SAFETY: metadata only.
    let v = unsafe {
        DeviceView::<f32, _>::from_raw_parts(FAKE_PTR, 24, Ix2(4, 6), &[6, 1], 0, 0, o).unwrap()
    };
    let sub = v.slice(s![1.., ..;-2]);
    let kv = sub.kernel_view::<2>().unwrap();
    assert_eq!(kv.ptr, FAKE_PTR + 4 * (6 + 5));
    assert_eq!((kv.shape, kv.strides), ([3, 3], [6, -2]));
    let kv4 = sub.kernel_view::<4>().unwrap();
    assert_eq!((kv4.shape, kv4.strides), ([1, 1, 3, 3], [0, 0, 6, -2]));
    let e = v
        .clone()
        .into_dyn()
        .insert_axis(Axis(0))
        .kernel_view::<2>()
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidAxis);
    assert_eq!(std::mem::size_of::<devspan::interop::KernelView<2>>(), 40);
}

/// The span of `v` as `DeviceBase::span` reports it: `Err(Aliasing)` for a half of a split whose
/// reachable range interleaves with the other half's.
fn span_of<S: SpanData, D: Dimension>(
    v: &DeviceBase<S, D>,
) -> devspan::Result<DeviceSpan<'_, S::Elem>> {
    v.span()
}

/// (length, device address) of `v`'s span.
fn span_parts<S: SpanData, D: Dimension>(v: &DeviceBase<S, D>) -> devspan::Result<(usize, u64)> {
    span_of(v).map(|sp| (sp.len(), sp.device_ptr()))
}

#[test]
fn outer_axis_split_narrows_each_half_span() {
    let (o, drops) = owner();
    // SAFETY: metadata only.
    let v = unsafe {
        DeviceViewMut::<u16, _>::from_raw_parts_mut(FAKE_PTR, 12, Ix1(12), &[1], 0, 0, o).unwrap()
    };
    let m = v.into_shape_with_order((3, 4)).unwrap();
    assert_eq!(span_parts(&m).unwrap(), (12, FAKE_PTR), "before the split");
    let (top, rest) = m.split_at(Axis(0), 1);
    // Rows [0] and [1, 2]: elements 0..4 and 4..12, two bytes each.
    assert_eq!(span_parts(&top).unwrap(), (4, FAKE_PTR));
    assert_eq!(span_parts(&rest).unwrap(), (8, FAKE_PTR + 8));
    assert_eq!(span_parts(&top.view()).unwrap(), (4, FAKE_PTR));
    assert_eq!(span_parts(&rest.view()).unwrap(), (8, FAKE_PTR + 8));
    // The views themselves still index from the same elements.
    assert_eq!(
        (top.device_ptr(), rest.device_ptr()),
        (FAKE_PTR, FAKE_PTR + 8)
    );
    // Splitting a half again narrows further.
    let (r1, r2) = rest.try_split_at(Axis(0), 1).unwrap();
    assert_eq!(span_parts(&r1).unwrap(), (4, FAKE_PTR + 8));
    assert_eq!(span_parts(&r2).unwrap(), (4, FAKE_PTR + 16));
    assert_eq!(r2.device_ptr(), FAKE_PTR + 16);
    drop((top, r1));
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "a narrowed half still holds the owner"
    );
    drop(r2);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn outer_axis_split_of_a_reversed_view_narrows_each_half_span() {
    let (o, drops) = owner();
    // SAFETY: metadata only.
    let mut v = unsafe {
        DeviceViewMut::<f32, _>::from_raw_parts_mut(FAKE_PTR, 12, Ix2(3, 4), &[4, 1], 0, 0, o)
            .unwrap()
    };
    v.invert_axis(Axis(0));
    // Row 0 of the view is memory row 2 (elements 8..12); rows 1 and 2 are memory rows 1 and 0.
    let (top, rest) = v.try_split_at(Axis(0), 1).unwrap();
    assert_eq!(span_parts(&top).unwrap(), (4, FAKE_PTR + 32));
    assert_eq!(span_parts(&rest).unwrap(), (8, FAKE_PTR));
    assert_eq!(top.device_ptr(), FAKE_PTR + 32);
    assert_eq!(rest.device_ptr(), FAKE_PTR + 16);
    let kv = rest.kernel_view::<2>().unwrap();
    assert_eq!((kv.ptr, kv.strides), (FAKE_PTR + 16, [-4, 1]));
    drop((top, rest));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn inner_axis_split_halves_have_no_span() {
    let (o, drops) = owner();
    // SAFETY: metadata only.
    let v = unsafe {
        DeviceViewMut::<u32, _>::from_raw_parts_mut(FAKE_PTR, 12, Ix2(3, 4), &[4, 1], 0, 0, o)
            .unwrap()
    };
    // Columns [0, 1] and [2, 3]: reachable ranges 0..=9 and 2..=11 interleave. Each half's span
    // still shrinks to its own range (so `right` starts at element 2).
    let (left, right) = v.try_split_at(Axis(1), 2).unwrap();
    assert_eq!(left.layout().reach(), Some((0, 9)));
    assert_eq!(right.layout().reach(), Some((0, 9)));
    let cases = [
        ("left", span_parts(&left)),
        ("right", span_parts(&right)),
        ("left.view()", span_parts(&left.view())),
        ("right.view()", span_parts(&right.view())),
    ];
    for (what, r) in cases {
        let e = r.expect_err(&format!(
            "{what}: the span of an interleaved half must be refused"
        ));
        assert_eq!(e.kind(), &ErrorKind::Aliasing, "{what}: {e}");
        assert!(!e.message().is_empty());
    }
    // The halves stay usable as views: metadata and kernel views are unaffected.
    assert_eq!(right.device_ptr(), FAKE_PTR + 8);
    assert_eq!(right.kernel_view::<2>().unwrap().strides, [4, 1]);
    drop(left);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(right);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}
