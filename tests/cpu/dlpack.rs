//! DLPack import and export on the CPU: managed tensors describe fake device addresses that are
//! never dereferenced; what is tested is metadata, validation and who calls which deleter when.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use devspan::dlpack::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPackVersion, DLTensor, DlpackTensor, MAX_NDIM,
};
use devspan::{DType, DeviceElement, DeviceOwner, DeviceView, DeviceViewMut, ErrorKind, Layout};
use half::{bf16, f16};
use ndarray::{Axis, Ix1, Ix2, Ix3, IxDyn, s};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cases::{for_each_case, pick, vec_of, weighted};

/// A device address that is never dereferenced.
const FAKE_PTR: u64 = 0x7f00_0000_0000;

// ---------------------------------------------------------------------------------------------
// devspan side: a counted owner for views over fake memory.

struct Counted {
    drops: Arc<AtomicUsize>,
}

impl DeviceOwner for Counted {}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn owner() -> (Arc<dyn DeviceOwner>, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    (
        Arc::new(Counted {
            drops: drops.clone(),
        }),
        drops,
    )
}

fn count(c: &AtomicUsize) -> usize {
    c.load(Ordering::SeqCst)
}

// ---------------------------------------------------------------------------------------------
// Producer side: managed tensors built by the test, with counting deleters.

/// What a test producer's deleter records.
#[derive(Default)]
pub(crate) struct Deletes {
    calls: AtomicUsize,
    thread: Mutex<Option<ThreadId>>,
}

impl Deletes {
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
    fn record(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self.thread.lock().unwrap() = Some(std::thread::current().id());
    }
}

#[repr(C)]
struct TestVersioned {
    managed: DLManagedTensorVersioned,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
    deletes: Arc<Deletes>,
    /// A tensor this one relays: its deleter is called after ours.
    inner: Option<DeleteInner>,
}

#[repr(C)]
struct TestLegacy {
    managed: DLManagedTensor,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
    deletes: Arc<Deletes>,
}

enum DeleteInner {
    Versioned(*mut DLManagedTensorVersioned),
}

unsafe extern "C" fn delete_test_versioned(p: *mut DLManagedTensorVersioned) {
    // SAFETY: `p` is the first field of a `Box<TestVersioned>` made by `versioned_tensor`.
    let b = unsafe { Box::from_raw(p.cast::<TestVersioned>()) };
    b.deletes.record();
    if let Some(DeleteInner::Versioned(inner)) = b.inner {
        // SAFETY: the relayed tensor is live and its deleter is called once, here.
        unsafe { ((*inner).deleter.unwrap())(inner) };
    }
}

unsafe extern "C" fn delete_test_legacy(p: *mut DLManagedTensor) {
    // SAFETY: `p` is the first field of a `Box<TestLegacy>` made by `legacy_tensor`.
    let b = unsafe { Box::from_raw(p.cast::<TestLegacy>()) };
    b.deletes.record();
}

/// The description of a test tensor; `shape`/`strides` of `None` become null pointers.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub(crate) legacy: bool,
    pub(crate) version: DLPackVersion,
    pub(crate) flags: u64,
    pub(crate) data: u64,
    pub(crate) byte_offset: u64,
    pub(crate) device: DLDevice,
    pub(crate) dtype: DLDataType,
    pub(crate) ndim: i32,
    pub(crate) shape: Option<Vec<i64>>,
    pub(crate) strides: Option<Vec<i64>>,
}

impl Spec {
    fn new(dtype: DType, shape: &[i64], strides: Option<&[i64]>) -> Spec {
        Spec {
            legacy: false,
            version: DLPackVersion { major: 1, minor: 0 },
            flags: 0,
            data: FAKE_PTR,
            byte_offset: 0,
            device: DLDevice::cuda(0),
            dtype: dtype.into(),
            ndim: shape.len() as i32,
            shape: Some(shape.to_vec()),
            strides: strides.map(|s| s.to_vec()),
        }
    }
}

/// A managed tensor handed to the code under test.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Raw {
    Versioned(*mut DLManagedTensorVersioned),
    Legacy(*mut DLManagedTensor),
}

fn dl_tensor(spec: &Spec, shape: &mut Vec<i64>, strides: &mut Option<Vec<i64>>) -> DLTensor {
    DLTensor {
        data: std::ptr::without_provenance_mut(spec.data as usize),
        device: spec.device,
        ndim: spec.ndim,
        dtype: spec.dtype,
        shape: if spec.shape.is_some() {
            shape.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        },
        strides: match strides {
            Some(s) => s.as_mut_ptr(),
            None => std::ptr::null_mut(),
        },
        byte_offset: spec.byte_offset,
    }
}

/// Builds the managed tensor of `spec`. Arrays are at least `MAX_NDIM + 1` long when `ndim` is
/// out of range, so that even a faulty reader would stay inside them.
pub(crate) fn make(spec: &Spec) -> (Raw, Arc<Deletes>) {
    let deletes = Arc::new(Deletes::default());
    let pad = |v: &Option<Vec<i64>>| {
        v.clone().map(|mut v| {
            if !(0..=MAX_NDIM as i32).contains(&spec.ndim) {
                v.resize(1000, 1);
            }
            v
        })
    };
    let mut shape = pad(&spec.shape).unwrap_or_default();
    let mut strides = pad(&spec.strides);
    let t = dl_tensor(spec, &mut shape, &mut strides);
    let strides = strides.unwrap_or_default();
    let raw = if spec.legacy {
        let b = Box::new(TestLegacy {
            managed: DLManagedTensor {
                dl_tensor: t,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_test_legacy),
            },
            _shape: shape,
            _strides: strides,
            deletes: deletes.clone(),
        });
        Raw::Legacy(Box::into_raw(b).cast())
    } else {
        let b = Box::new(TestVersioned {
            managed: DLManagedTensorVersioned {
                version: spec.version,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_test_versioned),
                flags: spec.flags,
                dl_tensor: t,
            },
            _shape: shape,
            _strides: strides,
            deletes: deletes.clone(),
            inner: None,
        });
        Raw::Versioned(Box::into_raw(b).cast())
    };
    (raw, deletes)
}

/// A consumer that passes an exported tensor on: a new managed tensor with the same
/// `DLTensor`, whose deleter counts and then calls the exported one.
fn relay(exported: *mut DLManagedTensorVersioned) -> (*mut DLManagedTensorVersioned, Arc<Deletes>) {
    let deletes = Arc::new(Deletes::default());
    // SAFETY: `exported` is live until its deleter runs, which only the relay calls.
    let (version, flags, t) = unsafe {
        (
            (*exported).version,
            (*exported).flags,
            (*exported).dl_tensor,
        )
    };
    let b = Box::new(TestVersioned {
        managed: DLManagedTensorVersioned {
            version,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_test_versioned),
            flags,
            dl_tensor: t,
        },
        _shape: Vec::new(),
        _strides: Vec::new(),
        deletes: deletes.clone(),
        inner: Some(DeleteInner::Versioned(exported)),
    });
    (Box::into_raw(b).cast(), deletes)
}

/// Takes ownership of a test tensor.
pub(crate) fn take(raw: Raw) -> devspan::Result<DlpackTensor> {
    // SAFETY: test tensors are live, their arrays hold `ndim` values (or more), the fake data is
    // never dereferenced, deleters may run on any thread, and each is handed over once.
    unsafe {
        match raw {
            Raw::Versioned(p) => DlpackTensor::from_versioned(p),
            Raw::Legacy(p) => DlpackTensor::from_legacy(p),
        }
    }
}

/// What an imported view looked like, and the view itself (kept alive until dropped).
pub(crate) struct Imported {
    pub(crate) span_ptr: u64,
    pub(crate) span_len: usize,
    pub(crate) device_ptr: u64,
    pub(crate) shape: Vec<usize>,
    pub(crate) strides: Vec<isize>,
    pub(crate) layout: Layout<IxDyn>,
    pub(crate) device: usize,
    pub(crate) view: Box<dyn Send>,
}

fn import_as<T: DeviceElement>(t: DlpackTensor, mutable: bool) -> devspan::Result<Imported> {
    fn info<S: devspan::SpanData>(
        v: &devspan::DeviceBase<S, IxDyn>,
    ) -> (u64, usize, u64, Layout<IxDyn>, usize) {
        let sp = v.span().unwrap();
        (
            sp.device_ptr(),
            sp.len(),
            v.device_ptr(),
            v.layout().clone(),
            v.device(),
        )
    }
    let (span_ptr, span_len, device_ptr, layout, device, view): (_, _, _, _, _, Box<dyn Send>) =
        if mutable {
            let v = t.into_view_mut::<T, IxDyn>()?;
            let (a, b, c, d, e) = info(&v);
            (a, b, c, d, e, Box::new(v))
        } else {
            let v = t.into_view::<T, IxDyn>()?;
            let (a, b, c, d, e) = info(&v);
            (a, b, c, d, e, Box::new(v))
        };
    Ok(Imported {
        span_ptr,
        span_len,
        device_ptr,
        shape: layout.shape().to_vec(),
        strides: layout.strides().to_vec(),
        layout,
        device,
        view,
    })
}

macro_rules! with_dtype {
    ($d:expr, $f:ident ( $($arg:expr),* )) => {
        match $d {
            DType::U8 => $f::<u8>($($arg),*),
            DType::I8 => $f::<i8>($($arg),*),
            DType::U16 => $f::<u16>($($arg),*),
            DType::I16 => $f::<i16>($($arg),*),
            DType::U32 => $f::<u32>($($arg),*),
            DType::I32 => $f::<i32>($($arg),*),
            DType::U64 => $f::<u64>($($arg),*),
            DType::I64 => $f::<i64>($($arg),*),
            DType::F16 => $f::<f16>($($arg),*),
            DType::BF16 => $f::<bf16>($($arg),*),
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
        }
    };
}

fn align_of_dtype(d: DType) -> usize {
    fn a<T>() -> usize {
        std::mem::align_of::<T>()
    }
    with_dtype!(d, a())
}

/// Imports `raw` as a view of `want` (`IxDyn`), from either kind of managed tensor.
pub(crate) fn import(raw: Raw, want: DType, mutable: bool) -> devspan::Result<Imported> {
    let t = take(raw)?;
    with_dtype!(want, import_as(t, mutable))
}

// ---------------------------------------------------------------------------------------------
// Round trips.

/// Named views over the same fake 4x5x6 allocation, in various layouts.
fn derived_views(o: Arc<dyn DeviceOwner>) -> Vec<(&'static str, DeviceView<'static, f32, IxDyn>)> {
    // SAFETY: metadata only; no device operation uses these views.
    let base = unsafe {
        DeviceView::<f32, _>::from_raw_parts(
            FAKE_PTR,
            4 * 5 * 6,
            Ix3(4, 5, 6),
            &[30, 6, 1],
            0,
            0,
            o,
        )
        .unwrap()
    };
    vec![
        ("contiguous", base.clone().into_dyn()),
        ("permuted", base.clone().permuted_axes([2, 0, 1]).into_dyn()),
        ("reversed", base.slice(s![..;-1, 1..4, ..;-2]).into_dyn()),
        ("indexed", base.index_axis(Axis(1), 3).into_dyn()),
        ("scalar", base.slice(s![2, 3, 4]).into_dyn()),
        ("empty", base.slice(s![1..1, .., ..]).into_dyn()),
        (
            "broadcast",
            base.index_axis(Axis(0), 1)
                .index_axis(Axis(0), 2)
                .broadcast((3, 6))
                .unwrap()
                .into_dyn(),
        ),
    ]
}

#[test]
fn versioned_round_trip_keeps_the_layout() {
    let (o, drops) = owner();
    for (name, v) in derived_views(o) {
        let shape = v.shape().to_vec();
        let strides = v.strides().to_vec();
        let device_ptr = v.device_ptr();
        let reach = v.layout().reach();
        let offset = v.layout().offset();
        let m = v.into_dlpack();
        // SAFETY: `m` is live until its deleter runs (when the imported view is dropped);
        // `shape` and `strides` hold `ndim` values.
        unsafe {
            let t = &(*m).dl_tensor;
            assert_eq!((*m).version, DLPackVersion { major: 1, minor: 1 }, "{name}");
            assert_eq!((*m).flags, DLPACK_FLAG_BITMASK_READ_ONLY, "{name}");
            assert_eq!(t.device, DLDevice::cuda(0), "{name}");
            assert_eq!(t.dtype, DType::F32.into(), "{name}");
            assert_eq!(t.ndim as usize, shape.len(), "{name}");
            assert_eq!(t.data.addr() as u64, device_ptr, "{name}");
            assert_eq!(t.byte_offset, 0, "{name}");
            assert!(!t.strides.is_null(), "{name}");
            let n = shape.len();
            let sh: Vec<usize> = std::slice::from_raw_parts(t.shape, n)
                .iter()
                .map(|&x| x as usize)
                .collect();
            let st: Vec<isize> = std::slice::from_raw_parts(t.strides, n)
                .iter()
                .map(|&x| x as isize)
                .collect();
            assert_eq!((sh, st), (shape.clone(), strides.clone()), "{name}");
        }
        let (relayed, deletes) = relay(m);
        let t = take(Raw::Versioned(relayed)).unwrap();
        assert!(t.is_read_only(), "{name}");
        assert_eq!(t.dtype().unwrap(), DType::F32);
        let w = t.into_view::<f32, IxDyn>().unwrap();
        assert_eq!(w.shape(), &shape[..], "{name}");
        assert_eq!(w.strides(), &strides[..], "{name}");
        assert_eq!(w.device_ptr(), device_ptr, "{name}");
        assert_eq!(w.device(), 0);
        match reach {
            Some((lo, hi)) => {
                // The imported span covers exactly the reachable elements.
                assert_eq!(
                    w.span().unwrap().device_ptr(),
                    FAKE_PTR + 4 * lo as u64,
                    "{name}"
                );
                assert_eq!(w.span().unwrap().len(), hi - lo + 1, "{name}");
                assert_eq!(w.layout().offset(), offset - lo, "{name}");
                assert_eq!(w.layout().reach(), Some((0, hi - lo)), "{name}");
            }
            None => assert_eq!(w.span().unwrap().len(), 0, "{name}"),
        }
        assert!(format!("{w:?}").contains("DLManagedTensorVersioned (kDLCUDA:0)"));
        assert_eq!(deletes.calls(), 0, "{name}: the view is alive");
        drop(w);
        assert_eq!(deletes.calls(), 1, "{name}");
    }
    assert_eq!(
        count(&drops),
        1,
        "every export released the owner's keep-alive"
    );
}

#[test]
fn the_owner_outlives_every_view_in_any_drop_order() {
    for order in 0..4 {
        let (o, drops) = owner();
        // SAFETY: metadata only.
        let v = unsafe {
            DeviceView::<bf16, _>::from_raw_parts(FAKE_PTR, 64, Ix2(8, 8), &[8, 1], 0, 0, o)
                .unwrap()
        };
        let keep = v.slice(s![1.., ..]);
        let (m, deletes) = relay(v.t().into_dlpack());
        let w = take(Raw::Versioned(m))
            .unwrap()
            .into_view::<bf16, Ix2>()
            .unwrap();
        let w2 = w.slice(s![..;2, 1..]);
        drop(v);
        match order {
            0 => {
                drop(keep);
                drop(w);
                assert_eq!(count(&drops), 0);
                drop(w2);
            }
            1 => {
                drop(w);
                drop(w2);
                assert_eq!(deletes.calls(), 1, "the export is released");
                assert_eq!(count(&drops), 0, "`keep` is alive");
                drop(keep);
            }
            2 => {
                let t = std::thread::spawn(move || {
                    drop(w);
                    drop(w2);
                    std::thread::current().id()
                });
                let id = t.join().unwrap();
                assert_eq!(*deletes.thread.lock().unwrap(), Some(id));
                drop(keep);
            }
            _ => {
                let handles: Vec<_> = [w, w2]
                    .into_iter()
                    .map(|x| std::thread::spawn(move || drop(x)))
                    .collect();
                drop(keep);
                for h in handles {
                    h.join().unwrap();
                }
            }
        }
        assert_eq!(deletes.calls(), 1, "order {order}");
        assert_eq!(count(&drops), 1, "order {order}");
    }
}

#[test]
fn writable_round_trips_keep_writability() {
    let (o, drops) = owner();
    // SAFETY: metadata only.
    let v = unsafe {
        DeviceViewMut::<i16, _>::from_raw_parts_mut(FAKE_PTR, 24, Ix2(4, 6), &[6, 1], 0, 0, o)
            .unwrap()
    };
    let (top, bottom) = v.split_at(Axis(0), 2);
    let (m, deletes) = relay(top.into_dlpack());
    // SAFETY: `m` is live.
    assert_eq!(unsafe { (*m).flags }, 0);
    let t = take(Raw::Versioned(m)).unwrap();
    assert!(!t.is_read_only());
    let w = t.into_view_mut::<i16, Ix2>().unwrap();
    assert_eq!(
        (w.shape(), w.strides()),
        (&[2usize, 6][..], &[6isize, 1][..])
    );
    assert_eq!(w.device_ptr(), FAKE_PTR);

    let l = bottom.into_dlpack_legacy();
    // SAFETY: `l` is live; `ndim` is 2.
    unsafe {
        assert_eq!((*l).dl_tensor.data.addr() as u64, FAKE_PTR + 2 * 6 * 2);
        assert_eq!(std::slice::from_raw_parts((*l).dl_tensor.shape, 2), &[2, 6]);
    }
    let t = take(Raw::Legacy(l)).unwrap();
    assert_eq!((t.version(), t.flags(), t.is_read_only()), (None, 0, false));
    let x = t.into_view_mut::<i16, IxDyn>().unwrap();
    assert_eq!(x.device_ptr(), FAKE_PTR + 24);
    assert!(format!("{x:?}").contains("DLManagedTensor (kDLCUDA:0)"));
    drop(w);
    assert_eq!(deletes.calls(), 1);
    assert_eq!(count(&drops), 0);
    std::thread::spawn(move || drop(x)).join().unwrap();
    assert_eq!(count(&drops), 1);
}

#[test]
fn read_only_exports_refuse_writable_imports() {
    let (o, drops) = owner();
    // SAFETY: metadata only.
    let v = unsafe {
        DeviceView::<f64, _>::from_raw_parts(FAKE_PTR, 6, Ix1(6), &[1], 0, 0, o).unwrap()
    };
    let (m, deletes) = relay(v.into_dlpack());
    let e = take(Raw::Versioned(m))
        .unwrap()
        .into_view_mut::<f64, Ix1>()
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
    assert!(e.message().contains("READ_ONLY"), "{e}");
    assert_eq!(deletes.calls(), 1);
    assert_eq!(count(&drops), 1);

    // The legacy form cannot carry the flag.
    let (o, drops) = owner();
    // SAFETY: metadata only.
    let v = unsafe {
        DeviceView::<f64, _>::from_raw_parts(FAKE_PTR, 6, Ix1(6), &[1], 0, 0, o).unwrap()
    };
    let t = take(Raw::Legacy(v.into_dlpack_legacy())).unwrap();
    assert!(!t.is_read_only());
    drop(t);
    assert_eq!(
        count(&drops),
        1,
        "dropping the DlpackTensor calls the deleter"
    );
}

#[test]
fn an_unconsumed_export_is_released_by_its_deleter() {
    let (o, drops) = owner();
    // SAFETY: metadata only.
    let v =
        unsafe { DeviceView::<u8, _>::from_raw_parts(FAKE_PTR, 6, Ix1(6), &[1], 0, 0, o).unwrap() };
    struct SendPtr(*mut DLManagedTensorVersioned);
    // SAFETY: DLPack deleters may be called from any thread.
    unsafe impl Send for SendPtr {}
    let m = SendPtr(v.clone().into_dlpack());
    let l = v.into_dlpack_legacy();
    std::thread::spawn(move || {
        let m = m;
        // SAFETY: `m` is live and deleted once, here.
        unsafe { ((*m.0).deleter.unwrap())(m.0) };
    })
    .join()
    .unwrap();
    assert_eq!(count(&drops), 0);
    // SAFETY: `l` is live and deleted once, here.
    unsafe { ((*l).deleter.unwrap())(l) };
    assert_eq!(count(&drops), 1);
}

// ---------------------------------------------------------------------------------------------
// Bad input.

#[test]
fn null_managed_pointers_are_errors() {
    // SAFETY: null is allowed by the contract.
    let e = unsafe { DlpackTensor::from_versioned(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
    // SAFETY: as above.
    let e = unsafe { DlpackTensor::from_legacy(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
}

/// `(name, spec, requested element type, writable, expected error kind or None for Ok)`.
type Case = (&'static str, Spec, DType, bool, Option<ErrorKind>);

fn bad_input_cases() -> Vec<Case> {
    use ErrorKind::*;
    let f32s = |shape: &[i64], strides: Option<&[i64]>| Spec::new(DType::F32, shape, strides);
    let with = |mut s: Spec, f: &dyn Fn(&mut Spec)| {
        f(&mut s);
        s
    };
    let dt = |code: u8, bits: u8, lanes: u16| DLDataType {
        code: DLDataTypeCode(code),
        bits,
        lanes,
    };
    vec![
        ("plain", f32s(&[2, 3], None), DType::F32, true, None),
        (
            "null data, nonzero size",
            with(f32s(&[2, 3], None), &|s| s.data = 0),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "null data, zero size",
            with(f32s(&[2, 0], None), &|s| s.data = 0),
            DType::F32,
            true,
            None,
        ),
        (
            "null data, 0-d",
            with(f32s(&[], None), &|s| s.data = 0),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "negative axis",
            f32s(&[2, -3], None),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "overflowing shape",
            f32s(&[i64::MAX, 4], None),
            DType::F32,
            false,
            Some(Overflow),
        ),
        (
            "overflowing empty shape",
            f32s(&[0, 1 << 40, 1 << 40], None),
            DType::F32,
            false,
            Some(Overflow),
        ),
        (
            "shape over isize::MAX bytes",
            f32s(&[1 << 62], Some(&[1])),
            DType::F32,
            false,
            Some(Overflow),
        ),
        (
            "negative ndim",
            with(f32s(&[2], None), &|s| s.ndim = -1),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "ndim past the limit",
            with(f32s(&[2], None), &|s| s.ndim = MAX_NDIM as i32 + 1),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "null shape",
            with(f32s(&[2, 2], None), &|s| s.shape = None),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "null shape, 0-d",
            with(f32s(&[], None), &|s| s.shape = None),
            DType::F32,
            false,
            None,
        ),
        (
            "stride overflow",
            f32s(&[3, 3], Some(&[i64::MAX, 1])),
            DType::F32,
            false,
            Some(Overflow),
        ),
        (
            "reach overflow",
            f32s(&[3, 3], Some(&[i64::MAX / 2, i64::MAX / 2])),
            DType::F32,
            false,
            Some(Overflow),
        ),
        (
            "below address 0",
            with(f32s(&[4], Some(&[-8])), &|s| s.data = 16),
            DType::F32,
            false,
            Some(OutOfBounds),
        ),
        (
            "past the address space",
            with(f32s(&[8], None), &|s| s.data = u64::MAX - 15),
            DType::F32,
            false,
            Some(Overflow),
        ),
        (
            "data + byte_offset overflows",
            with(f32s(&[1], None), &|s| s.byte_offset = u64::MAX - 3),
            DType::F32,
            false,
            Some(Overflow),
        ),
        (
            "misaligned byte_offset",
            with(f32s(&[4], None), &|s| s.byte_offset = 2),
            DType::F32,
            false,
            Some(Misaligned),
        ),
        (
            "misaligned data",
            with(Spec::new(DType::U64, &[4], None), &|s| {
                s.data = FAKE_PTR + 4
            }),
            DType::U64,
            false,
            Some(Misaligned),
        ),
        (
            "data + byte_offset aligned",
            with(f32s(&[4], None), &|s| {
                s.data = FAKE_PTR + 2;
                s.byte_offset = 6;
            }),
            DType::F32,
            false,
            None,
        ),
        (
            "bool",
            with(f32s(&[4], None), &|s| s.dtype = dt(6, 8, 1)),
            DType::U8,
            false,
            Some(UnsupportedDtype),
        ),
        (
            "complex64",
            with(f32s(&[4], None), &|s| s.dtype = dt(5, 64, 1)),
            DType::F32,
            false,
            Some(UnsupportedDtype),
        ),
        (
            "float8",
            with(f32s(&[4], None), &|s| s.dtype = dt(10, 8, 1)),
            DType::U8,
            false,
            Some(UnsupportedDtype),
        ),
        (
            "unknown code",
            with(f32s(&[4], None), &|s| s.dtype = dt(200, 32, 1)),
            DType::F32,
            false,
            Some(UnsupportedDtype),
        ),
        (
            "int24",
            with(f32s(&[4], None), &|s| s.dtype = dt(0, 24, 1)),
            DType::I32,
            false,
            Some(UnsupportedDtype),
        ),
        (
            "two lanes",
            with(f32s(&[4], None), &|s| s.dtype = dt(2, 32, 2)),
            DType::F32,
            false,
            Some(UnsupportedDtype),
        ),
        (
            "zero lanes",
            with(f32s(&[4], None), &|s| s.dtype = dt(2, 32, 0)),
            DType::F32,
            false,
            Some(UnsupportedDtype),
        ),
        (
            "another element type",
            f32s(&[4], None),
            DType::I32,
            false,
            Some(UnsupportedDtype),
        ),
        (
            "CPU tensor",
            with(f32s(&[4], None), &|s| {
                s.device.device_type = DLDeviceType::CPU
            }),
            DType::F32,
            false,
            Some(DeviceMismatch),
        ),
        (
            "ROCm tensor",
            with(f32s(&[4], None), &|s| {
                s.device.device_type = DLDeviceType::ROCM
            }),
            DType::F32,
            false,
            Some(DeviceMismatch),
        ),
        (
            "unknown device type",
            with(f32s(&[4], None), &|s| {
                s.device.device_type = DLDeviceType(-7)
            }),
            DType::F32,
            false,
            Some(DeviceMismatch),
        ),
        (
            "CUDA managed",
            with(f32s(&[4], None), &|s| {
                s.device = DLDevice {
                    device_type: DLDeviceType::CUDA_MANAGED,
                    device_id: 1,
                }
            }),
            DType::F32,
            true,
            None,
        ),
        (
            "CUDA host",
            with(f32s(&[4], None), &|s| {
                s.device.device_type = DLDeviceType::CUDA_HOST
            }),
            DType::F32,
            false,
            None,
        ),
        (
            "negative device id",
            with(f32s(&[4], None), &|s| s.device.device_id = -1),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "major version 2",
            with(f32s(&[4], None), &|s| {
                s.version = DLPackVersion { major: 2, minor: 0 };
                s.ndim = -99; // past `deleter`, the layout of another major version is unknown
            }),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "major version 0",
            with(f32s(&[4], None), &|s| {
                s.version = DLPackVersion { major: 0, minor: 9 }
            }),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "minor version 7",
            with(f32s(&[4], None), &|s| {
                s.version = DLPackVersion { major: 1, minor: 7 }
            }),
            DType::F32,
            false,
            None,
        ),
        (
            "read-only, writable asked",
            with(f32s(&[4], None), &|s| {
                s.flags = DLPACK_FLAG_BITMASK_READ_ONLY
            }),
            DType::F32,
            true,
            Some(InvalidArgument),
        ),
        (
            "read-only, read-only asked",
            with(f32s(&[4], None), &|s| {
                s.flags = DLPACK_FLAG_BITMASK_READ_ONLY | 6
            }),
            DType::F32,
            false,
            None,
        ),
        (
            "broadcast, writable asked",
            f32s(&[4, 3], Some(&[0, 1])),
            DType::F32,
            true,
            Some(Aliasing),
        ),
        (
            "broadcast, read-only asked",
            f32s(&[4, 3], Some(&[0, 1])),
            DType::F32,
            false,
            None,
        ),
        (
            "negative strides",
            with(f32s(&[3, 4], Some(&[-4, -1])), &|s| s.byte_offset = 11 * 4),
            DType::F32,
            true,
            None,
        ),
        (
            "legacy, negative axis",
            with(f32s(&[-1], None), &|s| s.legacy = true),
            DType::F32,
            false,
            Some(InvalidArgument),
        ),
        (
            "legacy ignores flags",
            with(f32s(&[4], None), &|s| {
                s.legacy = true;
                s.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
            }),
            DType::F32,
            true,
            None,
        ),
    ]
}

#[test]
fn bad_input_is_an_error_and_the_deleter_runs_once() {
    for (name, spec, want, mutable, expect) in bad_input_cases() {
        let (raw, deletes) = make(&spec);
        let r = import(raw, want, mutable);
        match (r, expect) {
            (Ok(v), None) => {
                assert_eq!(deletes.calls(), 0, "{name}: the view is alive");
                drop(v);
            }
            (Err(e), Some(kind)) => {
                assert_eq!(e.kind(), &kind, "{name}: {e}");
                assert!(!e.message().is_empty(), "{name}");
            }
            (r, expect) => panic!("{name}: expected {expect:?}, got {:?}", r.map(|v| v.shape)),
        }
        assert_eq!(deletes.calls(), 1, "{name}");
    }
}

#[test]
fn fixed_dimensions_must_match_ndim() {
    let (raw, deletes) = make(&Spec::new(DType::U32, &[2, 3, 4], None));
    let e = take(raw).unwrap().into_view::<u32, Ix2>().unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    assert_eq!(deletes.calls(), 1);

    let (raw, deletes) = make(&Spec::new(DType::U32, &[2, 3, 4], None));
    let v = take(raw).unwrap().into_view::<u32, Ix3>().unwrap();
    assert_eq!(v.strides(), &[12, 4, 1]);
    drop(v);
    assert_eq!(deletes.calls(), 1);
}

#[test]
fn negative_strides_place_the_span_at_the_lowest_element() {
    // A 3x4 f32 tensor read backwards along both axes: index zero is the last element.
    let mut spec = Spec::new(DType::F32, &[3, 4], Some(&[-4, -1]));
    spec.byte_offset = 11 * 4;
    let (raw, deletes) = make(&spec);
    let v = import(raw, DType::F32, true).unwrap();
    assert_eq!(v.span_ptr, FAKE_PTR);
    assert_eq!(v.span_len, 12);
    assert_eq!(v.layout.offset(), 11);
    assert_eq!(v.device_ptr, FAKE_PTR + 44);
    drop(v);
    assert_eq!(deletes.calls(), 1);
}

#[test]
fn accessors_report_the_producer_metadata() {
    let mut spec = Spec::new(DType::BF16, &[2, 5], None);
    spec.device = DLDevice {
        device_type: DLDeviceType::CUDA_MANAGED,
        device_id: 3,
    };
    spec.byte_offset = 8;
    spec.flags = 2;
    let (raw, deletes) = make(&spec);
    let t = take(raw).unwrap();
    assert_eq!(t.shape(), &[2, 5]);
    assert_eq!(t.strides(), &[5, 1], "null strides are row-major");
    assert_eq!(t.dtype().unwrap(), DType::BF16);
    assert_eq!(t.dl_dtype(), DType::BF16.into());
    assert_eq!(t.device().device_id, 3);
    assert_eq!((t.data_ptr(), t.byte_offset()), (FAKE_PTR, 8));
    assert_eq!((t.flags(), t.is_read_only()), (2, false));
    assert_eq!(t.version(), Some(DLPackVersion { major: 1, minor: 0 }));
    assert!(format!("{t:?}").contains("shape: [2, 5]"));
    let v = t.into_view::<bf16, Ix2>().unwrap();
    assert_eq!(v.device(), 3);
    assert_eq!(v.device_ptr(), FAKE_PTR + 8);
    drop(v);
    assert_eq!(deletes.calls(), 1);
}

#[test]
fn a_null_deleter_is_never_called() {
    let (raw, deletes) = make(&Spec::new(DType::U8, &[4], None));
    let Raw::Versioned(p) = raw else {
        unreachable!()
    };
    // SAFETY: `p` is live; the test frees it itself below.
    unsafe { (*p).deleter = None };
    let v = take(raw).unwrap().into_view::<u8, Ix1>().unwrap();
    drop(v);
    assert_eq!(deletes.calls(), 0);
    // SAFETY: `p` came from `Box::into_raw` of a `TestVersioned` and nobody else frees it.
    drop(unsafe { Box::from_raw(p.cast::<TestVersioned>()) });
}

// ---------------------------------------------------------------------------------------------
// Property test: random managed tensors against an independent model of the rules.

pub(crate) fn decode(t: DLDataType) -> Option<DType> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code.0, t.bits) {
        (0, 8) => DType::I8,
        (0, 16) => DType::I16,
        (0, 32) => DType::I32,
        (0, 64) => DType::I64,
        (1, 8) => DType::U8,
        (1, 16) => DType::U16,
        (1, 32) => DType::U32,
        (1, 64) => DType::U64,
        (2, 16) => DType::F16,
        (2, 32) => DType::F32,
        (2, 64) => DType::F64,
        (4, 16) => DType::BF16,
        _ => return None,
    })
}

/// What the import of `spec` as a view of `want` should give: the span (base address, length)
/// and effective strides, or the kind of error, checked in the documented order.
#[allow(clippy::type_complexity)]
pub(crate) fn model(
    spec: &Spec,
    want: DType,
    mutable: bool,
) -> Result<(u64, usize, Vec<isize>), ErrorKind> {
    use ErrorKind::*;
    let max = isize::MAX as i128;
    if !spec.legacy && spec.version.major != 1 {
        return Err(InvalidArgument);
    }
    if !(0..=MAX_NDIM as i32).contains(&spec.ndim) {
        return Err(InvalidArgument);
    }
    let shape = match &spec.shape {
        None if spec.ndim > 0 => return Err(InvalidArgument),
        None => Vec::new(),
        Some(s) => s.clone(),
    };
    if shape.iter().any(|&n| n < 0) {
        return Err(InvalidArgument);
    }
    let nonzero = shape
        .iter()
        .filter(|&&n| n != 0)
        .fold(1i128, |a, &n| a.saturating_mul(n as i128).min(1 << 100));
    if nonzero > max {
        return Err(Overflow);
    }
    let strides: Vec<i128> = match &spec.strides {
        Some(s) => s.iter().map(|&x| x as i128).collect(),
        None => {
            let mut st = vec![0i128; shape.len()];
            let mut acc = 1i128;
            for k in (0..shape.len()).rev() {
                st[k] = acc;
                acc *= shape[k].max(1) as i128;
            }
            st
        }
    };
    let read_only = !spec.legacy && spec.flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
    if mutable && read_only {
        return Err(InvalidArgument);
    }
    if decode(spec.dtype) != Some(want) {
        return Err(UnsupportedDtype);
    }
    if ![2, 3, 13].contains(&spec.device.device_type.0) {
        return Err(DeviceMismatch);
    }
    if spec.device.device_id < 0 {
        return Err(InvalidArgument);
    }
    let elem = want.size() as i128;
    if nonzero * elem > max {
        return Err(Overflow);
    }
    let first = spec.data as i128 + spec.byte_offset as i128;
    if first > u64::MAX as i128 {
        return Err(Overflow);
    }
    if first % align_of_dtype(want) as i128 != 0 {
        return Err(Misaligned);
    }
    let out_strides: Vec<isize> = strides.iter().map(|&s| s as isize).collect();
    if shape.contains(&0) {
        return Ok((first as u64, 0, out_strides));
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in shape.iter().zip(&strides) {
        if n <= 1 {
            continue;
        }
        let term = (n as i128 - 1) * s;
        if term > max || term < -max - 1 {
            return Err(Overflow);
        }
        if term < 0 {
            lo += term;
        } else {
            hi += term;
        }
        if lo < -max - 1 || hi > max {
            return Err(Overflow);
        }
    }
    if spec.data == 0 {
        return Err(InvalidArgument);
    }
    let base = first + lo * elem;
    let len = hi - lo + 1;
    if base <= 0 {
        return Err(OutOfBounds);
    }
    if len * elem > max || base + len * elem > u64::MAX as i128 {
        return Err(Overflow);
    }
    if mutable {
        let dims: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
        let l = Layout::new_strided(IxDyn(&dims), &out_strides, (-lo) as usize, len as usize)
            .expect("the model's span holds every reachable element");
        if !l.is_unaliased() {
            return Err(Aliasing);
        }
    }
    Ok((base as u64, len as usize, out_strides))
}

/// Checks that every reachable element lies in the imported span (all of them for small
/// tensors, the extremes of each axis otherwise).
pub(crate) fn check_reachable(v: &Imported, elem: usize) {
    let n = v.shape.iter().product::<usize>();
    if n == 0 {
        assert_eq!(v.span_len, 0);
        return;
    }
    let lo = v.span_ptr as i128;
    let hi = lo + (v.span_len * elem) as i128 - elem as i128;
    let addr = |idx: &[usize]| {
        v.device_ptr as i128
            + idx
                .iter()
                .zip(&v.strides)
                .map(|(&i, &s)| i as i128 * s as i128 * elem as i128)
                .sum::<i128>()
    };
    let (mut min, mut max) = (i128::MAX, i128::MIN);
    let mut visit = |idx: &[usize]| {
        let a = addr(idx);
        assert!(
            lo <= a && a <= hi,
            "element {idx:?} at {a:#x} outside {lo:#x}..={hi:#x}"
        );
        assert_eq!((a - lo) % elem as i128, 0);
        min = min.min(a);
        max = max.max(a);
    };
    let small = n <= 4096;
    let axes: Vec<Vec<usize>> = v
        .shape
        .iter()
        .map(|&d| {
            if small {
                (0..d).collect()
            } else {
                vec![0, d - 1]
            }
        })
        .collect();
    let mut idx = vec![0usize; v.shape.len()];
    let mut pos = vec![0usize; v.shape.len()];
    loop {
        for k in 0..idx.len() {
            idx[k] = axes[k][pos[k]];
        }
        visit(&idx);
        let mut k = idx.len();
        loop {
            if k == 0 {
                // The extremes are reached: the span is tight.
                assert_eq!((min, max), (lo, hi), "span is not tight");
                return;
            }
            k -= 1;
            pos[k] += 1;
            if pos[k] < axes[k].len() {
                break;
            }
            pos[k] = 0;
        }
    }
}

fn random_dtype(rng: &mut StdRng) -> DLDataType {
    match weighted(rng, &[6, 1]) {
        0 => DLDataType::from(pick(rng, &DType::ALL)),
        _ => DLDataType {
            code: DLDataTypeCode(rng.random_range(0..20)),
            bits: pick(rng, &[0, 1, 8, 16, 24, 32, 64, 128]),
            lanes: pick(rng, &[0, 1, 1, 2, 4]),
        },
    }
}

fn random_axis(rng: &mut StdRng) -> i64 {
    match weighted(rng, &[24, 2, 2, 1]) {
        0 => rng.random_range(1..5),
        1 => 0,
        2 => pick(rng, &[i64::MAX, 1 << 31, 1 << 32, 1 << 62, 3 << 20]),
        _ => pick(rng, &[-1, i64::MIN]),
    }
}

fn random_stride(rng: &mut StdRng) -> i64 {
    match weighted(rng, &[8, 1]) {
        0 => rng.random_range(-6..7),
        _ => pick(
            rng,
            &[
                1 << 40,
                -(1 << 40),
                1 << 62,
                -(1 << 62),
                i64::MAX,
                i64::MIN,
                1 << 20,
            ],
        ),
    }
}

fn random_spec(rng: &mut StdRng) -> Spec {
    let n = rng.random_range(0..8);
    let shape = vec_of(rng, n..=n, random_axis);
    let strides = match weighted(rng, &[1, 3]) {
        0 => None,
        _ => Some(vec_of(rng, n..=n, random_stride)),
    };
    let bad_ndim = match weighted(rng, &[30, 1]) {
        0 => None,
        _ => Some(pick(rng, &[-1, i32::MIN, 65, 1000])),
    };
    let null_shape = rng.random_bool(0.02);
    let version = DLPackVersion {
        major: match weighted(rng, &[9, 1]) {
            0 => 1,
            _ => rng.random_range(0..4),
        },
        minor: rng.random(),
    };
    let flags = match weighted(rng, &[6, 1, 1]) {
        0 => 0,
        1 => 1,
        _ => rng.random(),
    };
    let data = match weighted(rng, &[8, 1, 1, 1, 1, 1]) {
        0 => FAKE_PTR,
        1 => 0,
        2 => FAKE_PTR + rng.random_range(1..8),
        3 => u64::MAX - rng.random_range(0..64),
        4 => 8,
        _ => rng.random(),
    };
    let byte_offset = match weighted(rng, &[6, 2, 1, 1, 1]) {
        0 => 0,
        1 => rng.random_range(0..64) * 8,
        2 => rng.random_range(0..64),
        3 => u64::MAX - rng.random_range(0..16),
        _ => rng.random(),
    };
    let device = DLDevice {
        device_type: DLDeviceType(match weighted(rng, &[8, 1, 1, 1, 1]) {
            0 => 2,
            1 => 13,
            2 => 3,
            3 => 1,
            _ => rng.random(),
        }),
        device_id: match weighted(rng, &[12, 1]) {
            0 => rng.random_range(0..4),
            _ => rng.random(),
        },
    };
    Spec {
        legacy: rng.random_bool(0.25),
        version,
        flags,
        data,
        byte_offset,
        device,
        dtype: random_dtype(rng),
        ndim: bad_ndim.unwrap_or(n as i32),
        shape: if null_shape { None } else { Some(shape) },
        strides,
    }
}

/// Cases of the test below: `DLPACK_PROPS_CASES` overrides the count for local debugging;
/// Miri (`.ci/miri`) runs a handful.
fn cases() -> usize {
    if cfg!(miri) {
        16
    } else {
        std::env::var("DLPACK_PROPS_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000)
    }
}

#[test]
fn random_managed_tensors_import_as_the_model_says() {
    let draw = |rng: &mut StdRng| {
        (
            random_spec(rng),
            rng.random::<bool>(),
            pick(rng, &DType::ALL),
            rng.random_bool(0.15),
        )
    };
    for_each_case(cases(), draw, |&(ref spec, mutable, other, wrong_type)| {
        let want = match decode(spec.dtype) {
            Some(d) if !wrong_type => d,
            _ => other,
        };
        let expected = model(spec, want, mutable);
        let (raw, deletes) = make(spec);
        let got = import(raw, want, mutable);
        match (got, expected) {
            (Ok(v), Ok((base, len, strides))) => {
                case_assert_eq!(deletes.calls(), 0, "deleted while the view is alive");
                case_assert_eq!(v.span_ptr, base);
                case_assert_eq!(v.span_len, len);
                case_assert_eq!(&v.strides, &strides);
                let shape: Vec<usize> = spec
                    .shape
                    .clone()
                    .unwrap_or_default()
                    .iter()
                    .map(|&n| n as usize)
                    .collect();
                case_assert_eq!(&v.shape, &shape);
                case_assert_eq!(v.device_ptr, spec.data + spec.byte_offset);
                case_assert_eq!(v.device, spec.device.device_id as usize);
                if let Some((lo, hi)) = v.layout.reach() {
                    case_assert!(lo == 0 && hi < v.span_len);
                }
                check_reachable(&v, want.size());
                drop(v.view);
            }
            (Err(e), Err(kind)) => {
                case_assert_eq!(e.kind(), &kind, "{}", e);
                case_assert!(!e.message().is_empty());
            }
            (got, expected) => {
                return Err(format!(
                    "got {:?}, model says {:?}",
                    got.map(|v| v.span_len),
                    expected
                ));
            }
        }
        case_assert_eq!(deletes.calls(), 1, "the deleter runs exactly once");
        Ok(())
    });
}

#[test]
#[cfg_attr(
    miri,
    ignore = "checks the test generator only (no devspan code), 10^4 draws"
)]
fn random_managed_tensors_cover_every_outcome() {
    use std::collections::BTreeMap;
    // A fixed seed: the test checks the generator's statistics, not devspan.
    let mut rng = StdRng::seed_from_u64(0x0057_a715_71c5);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..10_000 {
        let (spec, mutable) = (random_spec(&mut rng), rng.random::<bool>());
        let want = decode(spec.dtype).unwrap_or(DType::F32);
        let key = match model(&spec, want, mutable) {
            Ok((_, 0, _)) => "Ok (empty)".to_string(),
            Ok(_) => "Ok".to_string(),
            Err(k) => format!("{k:?}"),
        };
        *seen.entry(key).or_default() += 1;
    }
    println!("{seen:#?}");
    for k in [
        "Ok",
        "Ok (empty)",
        "InvalidArgument",
        "Overflow",
        "Misaligned",
        "UnsupportedDtype",
        "DeviceMismatch",
        "OutOfBounds",
        "Aliasing",
    ] {
        assert!(
            seen.get(k).copied().unwrap_or(0) >= 20,
            "{k} is rarely generated: {seen:?}"
        );
    }
}
