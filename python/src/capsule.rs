//! DLPack capsules: taking a producer's capsule (renaming it `used_*`, as the protocol says) and
//! wrapping devspan's managed tensors in capsules whose destructor deletes them if no consumer
//! took them.

use std::ffi::{CStr, c_void};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::{PyErr, ffi};

use devspan::dlpack::{DLManagedTensor, DLManagedTensorVersioned, DlpackTensor};

pub(crate) const VERSIONED: &CStr = c"dltensor_versioned";
pub(crate) const LEGACY: &CStr = c"dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";

/// Takes the managed tensor out of a DLPack capsule: the capsule is renamed `used_dltensor`
/// or `used_dltensor_versioned`, and the returned [`DlpackTensor`] now owns the duty to call
/// the producer's deleter (on every path, error or not).
pub(crate) fn take(capsule: &Bound<'_, PyAny>) -> PyResult<DlpackTensor> {
    let py = capsule.py();
    let obj = capsule.as_ptr();
    // SAFETY: `obj` is a live object (borrowed from `capsule`) and the GIL is held.
    if unsafe { ffi::PyCapsule_CheckExact(obj) } == 0 {
        return Err(PyTypeError::new_err(format!(
            "expected a DLPack capsule or an object with __dlpack__ or __cuda_array_interface__, got {}",
            capsule.get_type().name()?
        )));
    }
    // SAFETY: `obj` is a capsule (checked above); the name pointer stays valid while the
    // capsule keeps its name, and it is copied before the capsule is renamed.
    let name = unsafe { ffi::PyCapsule_GetName(obj) };
    if name.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| {
            PyValueError::new_err("a capsule without a name is not a DLPack capsule")
        }));
    }
    // SAFETY: non-null names of capsules are NUL-terminated C strings.
    let name = unsafe { CStr::from_ptr(name) }.to_owned();
    let (versioned, used) = if name.as_c_str() == VERSIONED {
        (true, USED_VERSIONED)
    } else if name.as_c_str() == LEGACY {
        (false, USED_LEGACY)
    } else if name.as_c_str() == USED_VERSIONED || name.as_c_str() == USED_LEGACY {
        return Err(PyValueError::new_err(format!(
            "the DLPack capsule was already consumed (its name is {name:?})"
        )));
    } else {
        return Err(PyValueError::new_err(format!(
            "a capsule named {name:?} is not a DLPack capsule (\"dltensor\" or \"dltensor_versioned\")"
        )));
    };
    // SAFETY: `name` is the capsule's current name (checked above).
    let ptr = unsafe { ffi::PyCapsule_GetPointer(obj, name.as_ptr()) };
    if ptr.is_null() {
        return Err(PyErr::take(py)
            .unwrap_or_else(|| PyValueError::new_err("the DLPack capsule holds a null pointer")));
    }
    // A misaligned managed tensor cannot be read, so its deleter cannot be called: refuse it
    // before taking it, and leave the capsule to its producer's destructor.
    let align = if versioned {
        std::mem::align_of::<DLManagedTensorVersioned>()
    } else {
        std::mem::align_of::<DLManagedTensor>()
    };
    if !(ptr as usize).is_multiple_of(align) {
        return Err(PyValueError::new_err(format!(
            "the DLPack capsule's managed tensor at {ptr:p} is not {align}-byte aligned"
        )));
    }
    // SAFETY: `used` is a 'static C string, as capsule names must outlive the capsule.
    if unsafe { ffi::PyCapsule_SetName(obj, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: by the DLPack Python protocol, a capsule named "dltensor(_versioned)" holds a live
    // managed tensor of that kind whose deleter the consumer that renames the capsule must call;
    // the rename above made devspan that consumer, exactly once.
    let t = unsafe {
        if versioned {
            DlpackTensor::from_versioned(ptr.cast::<DLManagedTensorVersioned>())
        } else {
            DlpackTensor::from_legacy(ptr.cast::<DLManagedTensor>())
        }
    };
    t.map_err(super::to_py)
}

/// Runs `f` with the current Python exception, if any, set aside and restored afterwards:
/// capsule destructors run at any time, also while an exception propagates.
///
/// # Safety
/// The GIL must be held.
unsafe fn keeping_exception(f: impl FnOnce()) {
    let (mut ty, mut value, mut tb) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    // SAFETY: the GIL is held (contract); fetch moves the exception state into the three
    // owned references and restore moves them back.
    unsafe { ffi::PyErr_Fetch(&mut ty, &mut value, &mut tb) };
    f();
    // SAFETY: as above; whatever `f` left set is replaced by the saved state.
    unsafe { ffi::PyErr_Restore(ty, value, tb) };
}

unsafe extern "C" fn destroy_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the dying capsule and the GIL held. A capsule still named
    // "dltensor_versioned" was never consumed, so its tensor (made by devspan's export) is still
    // ours to delete, once; a consumed one (renamed) is left alone. `PyCapsule_IsValid` sets no
    // exception, and the deleter runs with any in-flight exception set aside.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            keeping_exception(|| {
                let p = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr())
                    .cast::<DLManagedTensorVersioned>();
                if let Some(deleter) = (*p).deleter {
                    deleter(p);
                }
            });
        }
    }
}

unsafe extern "C" fn destroy_legacy(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `destroy_versioned`, for "dltensor".
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            keeping_exception(|| {
                let p =
                    ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()).cast::<DLManagedTensor>();
                if let Some(deleter) = (*p).deleter {
                    deleter(p);
                }
            });
        }
    }
}

/// A capsule holding a versioned managed tensor made by devspan.
///
/// # Safety
/// `managed` is a live tensor from devspan's export whose deleter nobody else calls.
pub(crate) unsafe fn versioned(
    py: Python<'_>,
    managed: *mut DLManagedTensorVersioned,
) -> PyResult<Py<PyAny>> {
    // SAFETY: `managed` is non-null and live (the caller's contract); the name is 'static.
    let cap = unsafe {
        ffi::PyCapsule_New(
            managed.cast::<c_void>(),
            VERSIONED.as_ptr(),
            Some(destroy_versioned),
        )
    };
    if cap.is_null() {
        // SAFETY: the capsule was not made, so nobody else will delete the tensor.
        unsafe {
            if let Some(d) = (*managed).deleter {
                d(managed);
            }
        }
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `cap` is a new reference, handed to the `Py` handle.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) }.unbind())
}

/// A capsule holding a legacy managed tensor made by devspan.
///
/// # Safety
/// As [`versioned`].
pub(crate) unsafe fn legacy(py: Python<'_>, managed: *mut DLManagedTensor) -> PyResult<Py<PyAny>> {
    // SAFETY: as in `versioned`.
    let cap = unsafe {
        ffi::PyCapsule_New(
            managed.cast::<c_void>(),
            LEGACY.as_ptr(),
            Some(destroy_legacy),
        )
    };
    if cap.is_null() {
        // SAFETY: as in `versioned`.
        unsafe {
            if let Some(d) = (*managed).deleter {
                d(managed);
            }
        }
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `cap` is a new reference.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) }.unbind())
}

/// Run with `cargo test -p devspan-python --no-default-features` (the test binary links libpython).
#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use pyo3::exceptions::PyRuntimeError;

    use super::*;

    /// An owner of no memory that counts its drops.
    struct Counted(Arc<AtomicUsize>);
    impl devspan::DeviceOwner for Counted {}
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A capsule exporting a view over an address that is never dereferenced.
    fn capsule(py: Python<'_>, drops: &Arc<AtomicUsize>) -> Py<PyAny> {
        // SAFETY: metadata only; nothing reads or writes the address.
        let v = unsafe {
            devspan::DeviceView::<f32, _>::from_raw_parts(
                0x7f00_0000_0000,
                4,
                devspan::ndarray::Ix1(4),
                &[1],
                0,
                0,
                Arc::new(Counted(drops.clone())),
            )
        }
        .unwrap();
        // SAFETY: a fresh export, handed to the capsule once.
        unsafe { versioned(py, v.into_dlpack()) }.unwrap()
    }

    #[test]
    fn capsule_destructors_keep_the_exception_in_flight() {
        Python::initialize();
        Python::attach(|py| {
            // Consumed: the consumer deleted the tensor; the capsule dies during an exception.
            let drops = Arc::new(AtomicUsize::new(0));
            let cap = capsule(py, &drops);
            drop(take(cap.bind(py)).unwrap());
            assert_eq!(drops.load(Ordering::SeqCst), 1);
            PyRuntimeError::new_err("in flight").restore(py);
            drop(cap);
            assert!(PyErr::take(py).is_some(), "the exception was cleared");
            assert_eq!(drops.load(Ordering::SeqCst), 1);
            // Never consumed: the destructor deletes the tensor, once, and keeps the exception.
            let drops = Arc::new(AtomicUsize::new(0));
            let cap = capsule(py, &drops);
            PyRuntimeError::new_err("in flight").restore(py);
            drop(cap);
            assert!(PyErr::take(py).is_some(), "the exception was cleared");
            assert_eq!(drops.load(Ordering::SeqCst), 1);
        });
    }
}
