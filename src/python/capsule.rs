//! DLPack capsules: taking a producer's capsule (renaming it `used_*`, as the protocol says) and
//! wrapping devspan's managed tensors in capsules whose destructor deletes them if no consumer
//! took them.

use std::ffi::{CStr, c_void};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::{PyErr, ffi};

use crate::dlpack::{DLManagedTensor, DLManagedTensorVersioned, DlpackTensor};

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
            "expected a DLPack capsule or an object with __dlpack__, got {}",
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

unsafe extern "C" fn destroy_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the dying capsule and the GIL held. A capsule still named
    // "dltensor_versioned" was never consumed, so its tensor (made by devspan's export) is still
    // ours to delete, once.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            if let Some(deleter) = (*p).deleter {
                deleter(p);
            }
        } else {
            ffi::PyErr_Clear();
        }
    }
}

unsafe extern "C" fn destroy_legacy(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `destroy_versioned`, for "dltensor".
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()).cast::<DLManagedTensor>();
            if let Some(deleter) = (*p).deleter {
                deleter(p);
            }
        } else {
            ffi::PyErr_Clear();
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
