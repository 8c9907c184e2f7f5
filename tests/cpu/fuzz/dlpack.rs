//! Targets `dlpack_import` and `dlpack_export`: managed tensors with every field malformed
//! (the rules' model is the DLPack topic's, `crate::dlpack::model`), misaligned and null
//! pointers, and round trips of random views through both export forms.

use devspan::ErrorKind::{self, *};
use devspan::dlpack::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPackVersion, DlpackTensor, MAX_NDIM,
};
use devspan::{DType, DeviceElement, DeviceView, DeviceViewMut};
use half::{bf16, f16};
use ndarray::IxDyn;

use super::model::{self, Model};
use super::raw_parts::Owners;
use super::{FAKE_PTR, Outcome, Rng, Verdict, expect_kinds};
use crate::dlpack::{Raw, Spec, check_reachable, decode, import, make, model as dl_model, take};

/// A malformed pointer to feed in place of a good one.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bad {
    None,
    NullTensor,
    MisalignedTensor,
    MisalignedShape,
    MisalignedStrides,
}

#[derive(Debug)]
pub(crate) struct ImportCase {
    spec: Spec,
    want: DType,
    mutable: bool,
    bad: Bad,
}

fn axis_len(r: &mut Rng) -> i64 {
    match r.below(30) {
        0 | 1 => 0,
        2 => r.pick(&[i64::MAX, 1 << 31, 1 << 32, 1 << 62, 3 << 20, (1 << 31) - 1]),
        3 => r.pick(&[-1, i64::MIN, -(1 << 40)]),
        4 => r.extreme_usize() as i64,
        _ => 1 + r.below(4) as i64,
    }
}

fn dl_stride(r: &mut Rng) -> i64 {
    match r.below(10) {
        0 => r.pick(&[
            1 << 40,
            -(1 << 40),
            1 << 62,
            -(1 << 62),
            i64::MAX,
            i64::MIN,
            1 << 20,
        ]),
        1 => r.extreme_isize() as i64,
        _ => r.range(-6, 6),
    }
}

fn generate_import(r: &mut Rng) -> ImportCase {
    let rank = r.below(9);
    let shape: Vec<i64> = (0..rank).map(|_| axis_len(r)).collect();
    let strides = if r.chance(25) {
        None
    } else {
        Some((0..rank).map(|_| dl_stride(r)).collect())
    };
    let ndim = if r.chance(3) {
        r.pick(&[-1, i32::MIN, MAX_NDIM as i32 + 1, 1000, i32::MAX])
    } else {
        rank as i32
    };
    let dtype = if r.chance(85) {
        DLDataType::from(r.pick(&DType::ALL))
    } else {
        DLDataType {
            code: DLDataTypeCode(r.below(20) as u8),
            bits: r.pick(&[0u8, 1, 8, 16, 24, 32, 64, 128, 255]),
            lanes: r.pick(&[0u16, 1, 1, 2, 4, u16::MAX]),
        }
    };
    let spec = Spec {
        legacy: r.chance(25),
        version: DLPackVersion {
            major: if r.chance(90) {
                1
            } else {
                r.pick(&[0, 2, 3, u32::MAX])
            },
            minor: r.next() as u32,
        },
        flags: match r.below(8) {
            0 => DLPACK_FLAG_BITMASK_READ_ONLY,
            1 => r.next(),
            _ => 0,
        },
        data: match r.below(12) {
            0 => 0,
            1 => FAKE_PTR + 1 + r.below(7) as u64,
            2 => u64::MAX - r.below(64) as u64,
            3 => 8,
            4 => r.next(),
            _ => FAKE_PTR,
        },
        byte_offset: match r.below(10) {
            0 | 1 => 8 * r.below(64) as u64,
            2 => r.below(64) as u64,
            3 => u64::MAX - r.below(16) as u64,
            4 => r.next(),
            _ => 0,
        },
        device: DLDevice {
            device_type: DLDeviceType(match r.below(12) {
                0 => 13,
                1 => 3,
                2 => 1,
                3 => r.next() as i32,
                _ => 2,
            }),
            device_id: if r.chance(92) {
                r.below(4) as i32
            } else {
                r.next() as i32
            },
        },
        dtype,
        ndim,
        shape: if r.chance(2) { None } else { Some(shape) },
        strides,
    };
    let want = match decode(spec.dtype) {
        Some(d) if r.chance(85) => d,
        _ => r.pick(&DType::ALL),
    };
    ImportCase {
        spec,
        want,
        mutable: r.chance(50),
        bad: match r.below(40) {
            0 => Bad::NullTensor,
            1 => Bad::MisalignedTensor,
            2 | 3 => Bad::MisalignedShape,
            4 | 5 => Bad::MisalignedStrides,
            _ => Bad::None,
        },
    }
}

/// The `DLTensor` inside a test tensor.
fn dl_tensor(raw: Raw) -> *mut devspan::dlpack::DLTensor {
    // SAFETY: the test tensors are live boxes made by `make`; only the field's address is taken.
    unsafe {
        match raw {
            Raw::Versioned(p) => &raw mut (*p).dl_tensor,
            Raw::Legacy(p) => &raw mut (*p).dl_tensor,
        }
    }
}

fn import_case(c: &ImportCase) -> Verdict {
    let spec = &c.spec;
    if c.bad == Bad::NullTensor {
        // SAFETY: a null pointer is allowed and refused.
        let a = unsafe { DlpackTensor::from_versioned(std::ptr::null_mut()) };
        expect_kinds("from_versioned(null)", &a, &[InvalidArgument])?;
        // SAFETY: as above.
        let b = unsafe { DlpackTensor::from_legacy(std::ptr::null_mut()) };
        return expect_kinds("from_legacy(null)", &b, &[InvalidArgument]);
    }
    let (raw, deletes) = make(spec);
    if c.bad == Bad::MisalignedTensor {
        // A pointer one byte into the tensor: refused before anything is read or called.
        let r = match raw {
            // SAFETY: refused on its alignment, never dereferenced.
            Raw::Versioned(p) => unsafe {
                DlpackTensor::from_versioned(
                    p.cast::<u8>()
                        .wrapping_add(1)
                        .cast::<DLManagedTensorVersioned>(),
                )
            },
            // SAFETY: as above.
            Raw::Legacy(p) => unsafe {
                DlpackTensor::from_legacy(p.cast::<u8>().wrapping_add(1).cast::<DLManagedTensor>())
            },
        };
        expect_kinds("a misaligned managed tensor", &r, &[Misaligned])?;
        ensure!(
            deletes.calls() == 0,
            "the deleter of a misaligned tensor was called"
        );
        drop(take(raw));
        ensure!(deletes.calls() == 1, "the deleter runs once");
        return Ok(Outcome::Err(Misaligned));
    }
    let ndim_ok = (0..=MAX_NDIM as i32).contains(&spec.ndim);
    let version_ok = spec.legacy || spec.version.major == 1;
    let n = spec.ndim.max(0) as usize;
    // Copies of the arrays one byte off alignment, kept alive until the import returns. The
    // buffer is allocated as `u64`s, so that one byte into it is never 8-aligned, whatever
    // address the allocator picks.
    let mut shifted_words = vec![0u64; MAX_NDIM + 2];
    let shifted = shifted_words.as_mut_ptr().cast::<u8>();
    let mut forced: Option<ErrorKind> = None;
    if version_ok && ndim_ok && n > 0 {
        let t = dl_tensor(raw);
        // SAFETY: `t` points into the live test tensor; its arrays hold `ndim` values.
        unsafe {
            let (shape, strides) = ((*t).shape, (*t).strides);
            if !shape.is_null() {
                let src = if c.bad == Bad::MisalignedShape {
                    Some(shape)
                } else {
                    None
                };
                let src = src.or(if c.bad == Bad::MisalignedStrides && !strides.is_null() {
                    Some(strides)
                } else {
                    None
                });
                if let Some(src) = src {
                    std::ptr::copy_nonoverlapping(src.cast::<u8>(), shifted.add(1), 8 * n);
                    let p = shifted.add(1).cast::<i64>();
                    if c.bad == Bad::MisalignedShape {
                        (*t).shape = p;
                    } else {
                        (*t).strides = p;
                    }
                    forced = Some(Misaligned);
                }
            }
        }
    }
    let expected = dl_model(spec, c.want, c.mutable);
    let got = import(raw, c.want, c.mutable);
    drop(shifted_words);
    let outcome = match (got, forced, expected) {
        (Err(e), Some(k), _) => {
            ensure!(e.kind() == &k, "{e:?}, expected {k:?}");
            Outcome::Err(k)
        }
        (Ok(_), Some(k), _) => return Err(format!("Ok, expected {k:?}")),
        (Ok(v), None, Ok((base, len, strides))) => {
            ensure!(deletes.calls() == 0, "deleted while the view is alive");
            ensure!(
                (v.span_ptr, v.span_len) == (base, len),
                "span {:#x}+{}, the model has {base:#x}+{len}",
                v.span_ptr,
                v.span_len
            );
            ensure!(
                v.strides == strides,
                "strides {:?}, the model has {strides:?}",
                v.strides
            );
            let shape: Vec<usize> = spec
                .shape
                .clone()
                .unwrap_or_default()
                .iter()
                .map(|&x| x as usize)
                .collect();
            ensure!(v.shape == shape, "shape {:?}", v.shape);
            ensure!(
                v.device_ptr == spec.data + spec.byte_offset,
                "device_ptr {:#x}",
                v.device_ptr
            );
            ensure!(
                v.device == spec.device.device_id as usize,
                "device {}",
                v.device
            );
            if let Some((lo, hi)) = v.layout.reach() {
                ensure!(
                    lo == 0 && hi < v.span_len,
                    "reach {lo}..={hi} of a span of {}",
                    v.span_len
                );
            }
            check_reachable(&v, c.want.size());
            drop(v.view);
            Outcome::Ok
        }
        (Err(e), None, Err(kind)) => {
            ensure!(e.kind() == &kind, "{e:?}, the model expects {kind:?}");
            ensure!(!e.message().is_empty(), "an empty message");
            Outcome::Err(kind)
        }
        (got, None, expected) => {
            return Err(format!(
                "got {:?}, the model says {expected:?}",
                got.map(|v| v.span_len)
            ));
        }
    };
    ensure!(
        deletes.calls() == 1,
        "the deleter ran {} times",
        deletes.calls()
    );
    Ok(outcome)
}

#[test]
fn dlpack_import() {
    super::run("dlpack_import", 5000, generate_import, import_case);
}

// ---------------------------------------------------------------------------------------------
// dlpack_export

#[derive(Debug)]
pub(crate) struct ExportCase {
    dtype: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    span_len: usize,
    device: usize,
    writable: bool,
    legacy: bool,
    /// Call the deleter without importing.
    unconsumed: bool,
    import_mut: bool,
}

fn generate_export(r: &mut Rng) -> ExportCase {
    let (shape, strides, offset, span_len) = super::raw_parts::parts(r);
    ExportCase {
        dtype: r.below(4),
        shape,
        strides,
        offset,
        span_len,
        device: if r.chance(90) {
            r.below(8)
        } else {
            r.pick(&[i32::MAX as usize, i32::MAX as usize + 1, usize::MAX])
        },
        writable: r.chance(50),
        legacy: r.chance(40),
        unconsumed: r.chance(10),
        import_mut: r.chance(50),
    }
}

/// Reads an exported tensor's fields: `(flags, data, device id, shape, strides)`.
///
/// # Safety
/// `t` is the `DLTensor` of a live exported tensor.
unsafe fn read_export(t: &devspan::dlpack::DLTensor) -> (u64, i32, Vec<i64>, Vec<i64>) {
    let n = t.ndim as usize;
    // SAFETY: an export's arrays hold `ndim` values (the caller's contract).
    let (shape, strides) = unsafe {
        (
            if n == 0 {
                vec![]
            } else {
                std::slice::from_raw_parts(t.shape, n).to_vec()
            },
            if n == 0 {
                vec![]
            } else {
                std::slice::from_raw_parts(t.strides, n).to_vec()
            },
        )
    };
    (t.data.addr() as u64, t.device.device_id, shape, strides)
}

fn export_typed<T: DeviceElement>(c: &ExportCase) -> Verdict {
    let owners = Owners::default();
    let size = std::mem::size_of::<T>();
    let strides: Vec<i128> = c.strides.iter().map(|&s| s as i128).collect();
    let mut errs = model::layout_errors(
        &c.shape,
        &strides,
        c.offset as i128,
        c.span_len as i128,
        size,
    );
    if c.span_len as i128 * size as i128 > model::IMAX {
        errs.push(Overflow);
    }
    let writable = c.writable && errs.is_empty() && model::unaliased_rule(&c.shape, &strides);
    let (p_ver, p_leg, read_only, ptr, shape, vstrides) = if writable {
        // SAFETY: the address is never dereferenced; only metadata is read.
        let v = unsafe {
            DeviceViewMut::<T, _>::from_raw_parts_mut(
                FAKE_PTR,
                c.span_len,
                IxDyn(&c.shape),
                &c.strides,
                c.offset,
                c.device,
                owners.owner(),
            )
        }
        .map_err(|e| format!("writable view: {e}"))?;
        let (ptr, shape, st) = (v.device_ptr(), v.shape().to_vec(), v.strides().to_vec());
        if c.legacy {
            (None, Some(v.into_dlpack_legacy()), false, ptr, shape, st)
        } else {
            (Some(v.into_dlpack()), None, false, ptr, shape, st)
        }
    } else {
        // SAFETY: as above.
        let v = unsafe {
            DeviceView::<T, _>::from_raw_parts(
                FAKE_PTR,
                c.span_len,
                IxDyn(&c.shape),
                &c.strides,
                c.offset,
                c.device,
                owners.owner(),
            )
        };
        let first = expect_kinds("DeviceView::from_raw_parts", &v, &errs)?;
        let Ok(v) = v else {
            owners.all_dropped()?;
            return Ok(first);
        };
        let (ptr, shape, st) = (v.device_ptr(), v.shape().to_vec(), v.strides().to_vec());
        if c.legacy {
            (None, Some(v.into_dlpack_legacy()), true, ptr, shape, st)
        } else {
            (Some(v.into_dlpack()), None, true, ptr, shape, st)
        }
    };
    // The exported fields.
    // SAFETY: the pointers come straight from the exports, live until their deleters run.
    let fields = unsafe {
        match (p_ver, p_leg) {
            (Some(p), _) => {
                let want_flags = if read_only {
                    DLPACK_FLAG_BITMASK_READ_ONLY
                } else {
                    0
                };
                ensure!((*p).flags == want_flags, "flags {:#x}", (*p).flags);
                ensure!((*p).version.major == 1, "version");
                read_export(&(*p).dl_tensor)
            }
            (_, Some(p)) => read_export(&(*p).dl_tensor),
            _ => unreachable!(),
        }
    };
    let dev_id = i32::try_from(c.device).unwrap_or(-1);
    ensure!(
        fields.0 == ptr && fields.1 == dev_id,
        "data {:#x} / device {}",
        fields.0,
        fields.1
    );
    ensure!(
        fields
            .2
            .iter()
            .map(|&x| x as usize)
            .eq(shape.iter().copied())
            && fields
                .3
                .iter()
                .map(|&x| x as isize)
                .eq(vstrides.iter().copied()),
        "exported shape {:?} / strides {:?}",
        fields.2,
        fields.3
    );
    if c.unconsumed {
        // SAFETY: the exports are live and their deleters are called once, here.
        unsafe {
            match (p_ver, p_leg) {
                (Some(p), _) => ((*p).deleter.ok_or("no deleter")?)(p),
                (_, Some(p)) => ((*p).deleter.ok_or("no deleter")?)(p),
                _ => unreachable!(),
            }
        }
        owners.all_dropped()?;
        return Ok(Outcome::Ok);
    }
    // SAFETY: live exports, each handed over once.
    let t = unsafe {
        match (p_ver, p_leg) {
            (Some(p), _) => DlpackTensor::from_versioned(p),
            (_, Some(p)) => DlpackTensor::from_legacy(p),
            _ => unreachable!(),
        }
    }
    .map_err(|e| format!("re-import: {e}"))?;
    let mut kinds = Vec::new();
    if dev_id < 0 {
        kinds.push(InvalidArgument);
    }
    let m = Model::from_parts(&shape, &vstrides, 0);
    // The re-imported view against the exported one: shape, address, device and strides.
    let round_trip = |what: &str, v_shape: &[usize], v_strides: &[isize], v_ptr, v_device| {
        ensure!(
            v_shape == shape.as_slice() && v_ptr == ptr && v_device == c.device,
            "{what} differs: shape {v_shape:?}, ptr {v_ptr:#x}, device {v_device}"
        );
        ensure!(
            model::same_strides(&shape, v_strides, &vstrides),
            "{what} strides {v_strides:?}, exported {vstrides:?}"
        );
        Ok(())
    };
    let outcome = if c.import_mut {
        if read_only && !c.legacy {
            kinds.push(InvalidArgument);
        }
        if !model::unaliased_rule(&shape, &m.strides) {
            kinds.push(Aliasing);
        }
        let w = t.into_view_mut::<T, IxDyn>();
        let o = expect_kinds("into_view_mut", &w, &kinds)?;
        if let Ok(w) = &w {
            round_trip(
                "writable round trip",
                w.shape(),
                w.strides(),
                w.device_ptr(),
                w.device(),
            )?;
        }
        o
    } else {
        let v = t.into_view::<T, IxDyn>();
        let o = expect_kinds("into_view", &v, &kinds)?;
        if let Ok(v) = &v {
            round_trip(
                "round trip",
                v.shape(),
                v.strides(),
                v.device_ptr(),
                v.device(),
            )?;
        }
        o
    };
    owners.all_dropped()?;
    Ok(outcome)
}

fn export_case(c: &ExportCase) -> Verdict {
    match c.dtype {
        0 => export_typed::<u8>(c),
        1 => export_typed::<bf16>(c),
        2 => export_typed::<f16>(c),
        _ => export_typed::<f64>(c),
    }
}

#[test]
fn dlpack_export() {
    super::run("dlpack_export", 5000, generate_export, export_case);
}
