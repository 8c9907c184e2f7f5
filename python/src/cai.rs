//! The CUDA Array Interface, version 3: reading a producer's `__cuda_array_interface__` dict
//! (checked entirely before any CUDA call) and writing one for a devspan tensor.
//!
//! An imported interface becomes a DLPack managed tensor that holds the producer object, so
//! that it goes through the same checks and the same view as every DLPack import
//! ([`DlpackTensor`](devspan::dlpack::DlpackTensor)).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PyString, PyTuple};

use devspan::DType;
use devspan::dlpack::{
    DLDataType, DLDevice, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_READ_ONLY, DLPackVersion,
    DLTensor, MAX_NDIM,
};
use devspan::foreign::checked_size;
use devspan::{Error, ErrorKind, Result};

/// The interface version devspan writes, and the newest it reads.
pub(crate) const VERSION: i64 = 3;

/// A producer's `__cuda_array_interface__`, checked: every entry well-formed, the element count
/// and byte size within `isize::MAX`, a non-null aligned pointer unless the array is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interface {
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<usize>,
    /// In elements; `None` for C-contiguous (the interface's `strides: None`).
    pub(crate) strides: Option<Vec<isize>>,
    /// Address of the element at index zero (0 only for an empty array).
    pub(crate) data: u64,
    pub(crate) readonly: bool,
    /// The stream on which the producer may have work queued on the data: 1 (legacy default),
    /// 2 (per-thread default) or a `CUstream` handle; `None` when no synchronisation is needed.
    pub(crate) stream: Option<i64>,
}

impl Interface {
    /// Reads and checks `obj.__cuda_array_interface__`; `Err` (a devspan error) names the
    /// first malformed entry. Calls nothing in CUDA.
    pub(crate) fn of(obj: &Bound<'_, PyAny>) -> PyResult<Interface> {
        let d = obj.getattr("__cuda_array_interface__")?;
        Interface::parse(&d).map_err(super::to_py)
    }

    /// Checks an interface dict.
    pub(crate) fn parse(d: &Bound<'_, PyAny>) -> Result<Interface> {
        let d = d.cast::<PyDict>().map_err(|_| {
            crate::exceptions::invalid(format!(
                "__cuda_array_interface__ must be a dict, got {}",
                type_name(d)
            ))
        })?;
        let version = int(&required(d, "version")?, "version")?;
        if !(0..=VERSION).contains(&version) {
            return Err(crate::exceptions::invalid(format!(
                "__cuda_array_interface__ version {version} is not supported (devspan reads versions 0 to {VERSION})"
            )));
        }
        let typestr = required(d, "typestr")?;
        let typestr = typestr.cast::<PyString>().map_err(|_| {
            crate::exceptions::invalid(format!(
                "typestr must be a str, got {}",
                type_name(&typestr)
            ))
        })?;
        let dtype = dtype_of(&typestr.to_string())?;
        let size = dtype.size();

        let raw_shape = ints(&required(d, "shape")?, "shape")?;
        if raw_shape.len() > MAX_NDIM {
            return Err(crate::exceptions::invalid(format!(
                "shape has {} axes; devspan views at most {MAX_NDIM}",
                raw_shape.len()
            )));
        }
        let shape = raw_shape
            .iter()
            .map(|&n| {
                usize::try_from(n).map_err(|_| {
                    crate::exceptions::invalid(format!(
                        "axis length {n} in shape {raw_shape:?} is negative"
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let count = checked_size(&shape, size)?;

        let strides = match optional(d, "strides")? {
            None => None,
            Some(s) => {
                let bytes = ints(&s, "strides")?;
                if bytes.len() != shape.len() {
                    return Err(crate::exceptions::invalid(format!(
                        "strides {bytes:?} has {} entries for the {}-d shape {shape:?}",
                        bytes.len(),
                        shape.len()
                    )));
                }
                let elements = bytes
                    .iter()
                    .map(|&b| {
                        if b % size as i64 != 0 {
                            return Err(crate::exceptions::misaligned(format!(
                                "stride {b} in strides {bytes:?} (bytes) is not a multiple of the {size}-byte {dtype} element"
                            )));
                        }
                        isize::try_from(b / size as i64).map_err(|_| {
                            crate::exceptions::overflow(format!("stride {b} in strides {bytes:?} overflows isize"))
                        })
                    })
                    .collect::<Result<Vec<isize>>>()?;
                Some(elements)
            }
        };

        let (data, readonly) = match d.get_item("data").map_err(py_err)? {
            None => return Err(missing("data")),
            // An empty array may have no address at all; it is then checked below.
            Some(v) if v.is_none() => (0, false),
            Some(v) => pointer(&v)?,
        };
        if data == 0 && count > 0 {
            return Err(crate::exceptions::invalid(format!(
                "null data pointer for an array of {count} elements (shape {shape:?})"
            )));
        }
        let align = size as u64;
        if data % align != 0 {
            return Err(crate::exceptions::misaligned(format!(
                "data pointer 0x{data:x} is not aligned to {align} bytes as {dtype} needs"
            )));
        }

        if let Some(m) = optional(d, "mask")? {
            return Err(crate::exceptions::invalid(format!(
                "masked arrays are not supported (mask is a {}, not None)",
                type_name(&m)
            )));
        }

        let stream = match optional(d, "stream")? {
            None => None,
            Some(s) => Some(stream_value(&s)?),
        };
        Ok(Interface {
            dtype,
            shape,
            strides,
            data,
            readonly,
            stream,
        })
    }

    /// A DLPack managed tensor over the memory the interface describes, on CUDA device
    /// `device`, that holds `owner` (the producer object) until its deleter runs. The caller
    /// hands it to [`DlpackTensor::from_versioned`](devspan::dlpack::DlpackTensor::from_versioned),
    /// which calls the deleter once.
    pub(crate) fn into_managed(
        self,
        device: usize,
        owner: Py<PyAny>,
    ) -> Result<*mut DLManagedTensorVersioned> {
        let device_id = i32::try_from(device).map_err(|_| {
            crate::exceptions::invalid(format!("device ordinal {device} does not fit an int"))
        })?;
        let ndim = self.shape.len() as i32;
        let mut managed = Box::new(Managed {
            tensor: DLManagedTensorVersioned {
                version: DLPackVersion::CURRENT,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete),
                flags: if self.readonly {
                    DLPACK_FLAG_BITMASK_READ_ONLY
                } else {
                    0
                },
                dl_tensor: DLTensor {
                    data: self.data as usize as *mut std::ffi::c_void,
                    device: DLDevice::cuda(device_id),
                    ndim,
                    dtype: DLDataType::from(self.dtype),
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            shape: self.shape.iter().map(|&n| n as i64).collect(),
            strides: self.strides.map(|s| s.iter().map(|&x| x as i64).collect()),
            _owner: owner,
        });
        // The vectors' buffers do not move with the box.
        managed.tensor.dl_tensor.shape = managed.shape.as_mut_ptr();
        if let Some(s) = managed.strides.as_mut() {
            managed.tensor.dl_tensor.strides = s.as_mut_ptr();
        }
        Ok(Box::into_raw(managed).cast::<DLManagedTensorVersioned>())
    }
}

/// The managed tensor of an imported interface and what it points to.
#[repr(C)]
struct Managed {
    /// First, so that a pointer to the tensor is a pointer to the whole.
    tensor: DLManagedTensorVersioned,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    /// Dropped without the GIL, PyO3 defers the decrement until a thread next attaches.
    _owner: Py<PyAny>,
}

unsafe extern "C" fn delete(tensor: *mut DLManagedTensorVersioned) {
    // SAFETY: `tensor` is the first field of a `Managed` (`repr(C)`) that `into_managed` boxed
    // and leaked; the consumer calls the deleter once.
    drop(unsafe { Box::from_raw(tensor.cast::<Managed>()) });
}

/// The interface's type string for `dtype`: little-endian (`<`), or `|` for one-byte types.
/// `None` for bf16, which has none.
pub(crate) fn typestr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::U64 => "<u8",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::BF16 => return None,
    })
}

/// The element type a NumPy type string names: byte order (`<`, `|`, or `=` on little-endian
/// hosts; `>` only for one-byte types), kind (`i`, `u`, `f`) and size in bytes.
pub(crate) fn dtype_of(typestr: &str) -> Result<DType> {
    let unsupported = |why: &str| {
        Error::new(
            ErrorKind::UnsupportedDtype,
            format!("typestr {typestr:?} {why}"),
        )
    };
    let mut chars = typestr.chars();
    let (Some(order), Some(kind)) = (chars.next(), chars.next()) else {
        return Err(unsupported("is not a NumPy type string"));
    };
    let size: usize = chars
        .as_str()
        .parse()
        .map_err(|_| unsupported("is not a NumPy type string"))?;
    let little = match order {
        '<' | '|' => true,
        '=' => cfg!(target_endian = "little"),
        '>' => size == 1,
        _ => {
            return Err(unsupported(
                "has no byte order character ('<', '>', '|' or '=')",
            ));
        }
    };
    if !little {
        return Err(unsupported(
            "is big-endian; devspan's elements are little-endian",
        ));
    }
    let dtype = match (kind, size) {
        ('u', 1) => DType::U8,
        ('i', 1) => DType::I8,
        ('u', 2) => DType::U16,
        ('i', 2) => DType::I16,
        ('u', 4) => DType::U32,
        ('i', 4) => DType::I32,
        ('u', 8) => DType::U64,
        ('i', 8) => DType::I64,
        ('f', 2) => DType::F16,
        ('f', 4) => DType::F32,
        ('f', 8) => DType::F64,
        _ => {
            return Err(unsupported(
                "is not one of devspan's element types (i1-i8, u1-u8, f2, f4, f8)",
            ));
        }
    };
    Ok(dtype)
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}

fn py_err(e: PyErr) -> Error {
    crate::exceptions::invalid(format!("__cuda_array_interface__ could not be read: {e}"))
}

fn missing(key: &str) -> Error {
    crate::exceptions::invalid(format!(
        "__cuda_array_interface__ has no {key:?} entry, which the interface requires"
    ))
}

fn required<'py>(d: &Bound<'py, PyDict>, key: &str) -> Result<Bound<'py, PyAny>> {
    d.get_item(key).map_err(py_err)?.ok_or_else(|| missing(key))
}

/// The entry, with an absent entry and `None` both `None`.
fn optional<'py>(d: &Bound<'py, PyDict>, key: &str) -> Result<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key).map_err(py_err)?.filter(|v| !v.is_none()))
}

/// A Python int (not a bool) that fits an `i64`.
fn int(v: &Bound<'_, PyAny>, what: &str) -> Result<i64> {
    if !v.is_instance_of::<PyInt>() || v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(crate::exceptions::invalid(format!(
            "{what} must be an int, got {}",
            type_name(v)
        )));
    }
    v.extract::<i64>()
        .map_err(|_| crate::exceptions::overflow(format!("{what} {v} does not fit in 64 bits")))
}

/// A tuple (or list) of ints.
fn ints(v: &Bound<'_, PyAny>, what: &str) -> Result<Vec<i64>> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(t) = v.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = v.cast::<PyList>() {
        l.iter().collect()
    } else {
        return Err(crate::exceptions::invalid(format!(
            "{what} must be a tuple of ints, got {}",
            type_name(v)
        )));
    };
    if items.len() > MAX_NDIM {
        return Err(crate::exceptions::invalid(format!(
            "{what} has {} entries; devspan views at most {MAX_NDIM} axes",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, x)| int(x, &format!("{what}[{i}]")))
        .collect()
}

/// `data`: a 2-tuple of the address (a non-negative int below 2^64) and the read-only flag.
fn pointer(v: &Bound<'_, PyAny>) -> Result<(u64, bool)> {
    let pair = v
        .cast::<PyTuple>()
        .ok()
        .filter(|t| t.len() == 2)
        .ok_or_else(|| {
            crate::exceptions::invalid(format!(
                "data must be a 2-tuple (pointer, read-only flag), got {}",
                v.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
    let (ptr, flag) = (
        pair.get_item(0).map_err(py_err)?,
        pair.get_item(1).map_err(py_err)?,
    );
    if !ptr.is_instance_of::<PyInt>() || ptr.is_instance_of::<pyo3::types::PyBool>() {
        return Err(crate::exceptions::invalid(format!(
            "the data pointer must be an int, got {}",
            type_name(&ptr)
        )));
    }
    let address = match ptr.extract::<u64>() {
        Ok(a) => a,
        Err(_) if ptr.extract::<i64>().is_ok() => {
            return Err(crate::exceptions::invalid(format!(
                "negative data pointer {ptr}"
            )));
        }
        Err(_) => {
            return Err(crate::exceptions::overflow(format!(
                "data pointer {ptr} does not fit in 64 bits"
            )));
        }
    };
    let readonly = flag.extract::<bool>().map_err(|_| {
        crate::exceptions::invalid(format!(
            "the read-only flag of data must be a bool, got {}",
            type_name(&flag)
        ))
    })?;
    Ok((address, readonly))
}

/// `stream`: 1, 2 or a plausible `CUstream` handle. 0 is disallowed by the interface (it
/// could mean no synchronisation, the legacy or the per-thread default stream).
fn stream_value(v: &Bound<'_, PyAny>) -> Result<i64> {
    let s = int(v, "stream")?;
    if s == 0 {
        return Err(crate::exceptions::invalid(
            "stream 0 is disallowed by the CUDA Array Interface (it is ambiguous): the producer \
             must give None, 1 (legacy default), 2 (per-thread default) or a stream handle",
        ));
    }
    super::cuda::check_stream_value(s).map_err(crate::exceptions::invalid)?;
    Ok(s)
}

/// Run with `cargo test -p devspan-python --no-default-features` (the test binary links libpython).
#[cfg(test)]
mod tests {
    use pyo3::types::PyDict;

    use super::*;

    fn parse(py: Python<'_>, code: &str) -> Result<Interface> {
        let d = py
            .eval(&std::ffi::CString::new(code).unwrap(), None, None)
            .unwrap();
        Interface::parse(&d)
    }

    const GOOD: &str =
        "{'shape': (2, 3), 'typestr': '<f4', 'data': (0x7f0000000000, False), 'version': 3}";

    /// GOOD with `entries` added or replaced (Python dict syntax).
    fn with(entries: &str) -> String {
        format!("{{**{GOOD}, {entries}}}")
    }

    #[test]
    fn typestrs_name_devspan_dtypes_both_ways() {
        for d in DType::ALL {
            match typestr(d) {
                Some(t) => assert_eq!(dtype_of(t).unwrap(), d, "{t}"),
                None => assert_eq!(d, DType::BF16),
            }
        }
        assert_eq!(dtype_of(">u1").unwrap(), DType::U8);
        for bad in [
            ">f4", "<b1", "<c8", "<f16", "<V2", "f4", "", "<", "<fx", "!f4",
        ] {
            let e = dtype_of(bad).unwrap_err();
            assert_eq!(e.kind(), &ErrorKind::UnsupportedDtype, "{bad}");
        }
    }

    #[test]
    fn a_well_formed_interface_is_read() {
        Python::initialize();
        Python::attach(|py| {
            let i = parse(py, GOOD).unwrap();
            assert_eq!(
                i,
                Interface {
                    dtype: DType::F32,
                    shape: vec![2, 3],
                    strides: None,
                    data: 0x7f00_0000_0000,
                    readonly: false,
                    stream: None,
                }
            );
            let i = parse(
                py,
                &with("'strides': (-4, 8), 'stream': 2, 'mask': None, 'descr': [('', '<f4')], 'data': (0x7f0000000010, True)"),
            )
            .unwrap();
            assert_eq!(i.strides, Some(vec![-1, 2]));
            assert_eq!(
                (i.stream, i.readonly, i.data),
                (Some(2), true, 0x7f00_0000_0010)
            );
            // An empty array may give no address.
            let i = parse(py, &with("'shape': (0, 3), 'data': None")).unwrap();
            assert_eq!((i.data, i.shape), (0, vec![0, 3]));
            assert_eq!(
                parse(py, &with("'shape': [4], 'version': 0"))
                    .unwrap()
                    .shape,
                [4]
            );
        });
    }

    #[test]
    fn malformed_interfaces_are_errors_that_name_the_entry() {
        Python::initialize();
        Python::attach(|py| {
            let cases: &[(String, ErrorKind, &str)] = &[
                (
                    "[1, 2]".into(),
                    ErrorKind::InvalidArgument,
                    "must be a dict",
                ),
                (
                    "{'typestr': '<f4', 'data': (4096, False), 'version': 3}".into(),
                    ErrorKind::InvalidArgument,
                    "\"shape\"",
                ),
                (
                    "{'shape': (2,), 'data': (4096, False), 'version': 3}".into(),
                    ErrorKind::InvalidArgument,
                    "\"typestr\"",
                ),
                (
                    "{'shape': (2,), 'typestr': '<f4', 'version': 3}".into(),
                    ErrorKind::InvalidArgument,
                    "\"data\"",
                ),
                (
                    "{'shape': (2,), 'typestr': '<f4', 'data': (4096, False)}".into(),
                    ErrorKind::InvalidArgument,
                    "\"version\"",
                ),
                (
                    with("'version': 4"),
                    ErrorKind::InvalidArgument,
                    "version 4",
                ),
                (
                    with("'version': '3'"),
                    ErrorKind::InvalidArgument,
                    "version must be an int",
                ),
                (
                    with("'typestr': 4"),
                    ErrorKind::InvalidArgument,
                    "typestr must be a str",
                ),
                (with("'typestr': '<c8'"), ErrorKind::UnsupportedDtype, "<c8"),
                (
                    with("'shape': 6"),
                    ErrorKind::InvalidArgument,
                    "shape must be a tuple",
                ),
                (
                    with("'shape': (2, 3.0)"),
                    ErrorKind::InvalidArgument,
                    "shape[1] must be an int",
                ),
                (with("'shape': (2, -3)"), ErrorKind::InvalidArgument, "-3"),
                (
                    with("'shape': (1 << 31, 1 << 31)"),
                    ErrorKind::Overflow,
                    "isize::MAX",
                ),
                (with("'shape': (1 << 70,)"), ErrorKind::Overflow, "64 bits"),
                (
                    with("'shape': (1,) * 65"),
                    ErrorKind::InvalidArgument,
                    "at most 64",
                ),
                (
                    with("'strides': (12, 6)"),
                    ErrorKind::Misaligned,
                    "stride 6",
                ),
                (
                    with("'strides': (12,)"),
                    ErrorKind::InvalidArgument,
                    "1 entries",
                ),
                (
                    with("'strides': 'C'"),
                    ErrorKind::InvalidArgument,
                    "strides must be a tuple",
                ),
                (
                    with("'data': None"),
                    ErrorKind::InvalidArgument,
                    "null data pointer",
                ),
                (
                    with("'data': (0, False)"),
                    ErrorKind::InvalidArgument,
                    "null data pointer",
                ),
                (
                    with("'data': (4098, False)"),
                    ErrorKind::Misaligned,
                    "aligned",
                ),
                (
                    with("'data': (-4096, False)"),
                    ErrorKind::InvalidArgument,
                    "negative",
                ),
                (
                    with("'data': (1 << 64, False)"),
                    ErrorKind::Overflow,
                    "64 bits",
                ),
                (with("'data': 4096"), ErrorKind::InvalidArgument, "2-tuple"),
                (
                    with("'data': (4096,)"),
                    ErrorKind::InvalidArgument,
                    "2-tuple",
                ),
                (
                    with("'data': ('4096', False)"),
                    ErrorKind::InvalidArgument,
                    "must be an int",
                ),
                (
                    with("'data': (4096, 'no')"),
                    ErrorKind::InvalidArgument,
                    "read-only flag",
                ),
                (with("'mask': (0, 1)"), ErrorKind::InvalidArgument, "masked"),
                (
                    with("'stream': 0"),
                    ErrorKind::InvalidArgument,
                    "stream 0 is disallowed",
                ),
                (
                    with("'stream': -1"),
                    ErrorKind::InvalidArgument,
                    "not a CUDA stream",
                ),
                (
                    with("'stream': 7"),
                    ErrorKind::InvalidArgument,
                    "cannot be a CUstream",
                ),
                (
                    with("'stream': 1.0"),
                    ErrorKind::InvalidArgument,
                    "stream must be an int",
                ),
            ];
            for (code, kind, message) in cases {
                let e = parse(py, code).unwrap_err();
                assert_eq!(e.kind(), kind, "{code}: {e}");
                assert!(e.to_string().contains(message), "{code}: {e}");
            }
            // Not a dict at all, through the attribute.
            let d = PyDict::new(py);
            assert!(Interface::parse(&d).is_err());
        });
    }
}
