//! What the steerings of `devspan::internals` plan, on the host alone: rows copied from a
//! contiguous source into a column slice `x[.., ..c]` of a `[rows, c + 1]` matrix (the layout
//! of the `short-rows` bench group's `into` rows, in copies of a few MiB at most), by default
//! and steered.

use std::sync::Arc;

use devspan::internals::{Steer, copy_path_steered};
use devspan::{DeviceElement, DeviceOwner, DeviceView, DeviceViewMut};
use half::f16;
use ndarray::{Ix2, s};

/// A device address that is never dereferenced: these tests plan only.
const FAKE_PTR: u64 = 0x7f00_0000_0000;

struct NoOwner;
impl DeviceOwner for NoOwner {}

/// The path of the copy of a contiguous `[rows, c]` of `T` into `[.., ..c]` of a `[rows, c + 1]`
/// matrix, steered by `steer`.
fn into_slice<T: DeviceElement>(rows: usize, c: usize, steer: Steer) -> String {
    let owner: Arc<dyn DeviceOwner> = Arc::new(NoOwner);
    // SAFETY: the views are never used by a device operation; only the planner reads them.
    let src = unsafe {
        DeviceView::<T, _>::from_raw_parts(
            FAKE_PTR,
            rows * c,
            Ix2(rows, c),
            &[c as isize, 1],
            0,
            0,
            owner.clone(),
        )
    }
    .unwrap();
    // SAFETY: as above, 1 GiB further on.
    let padded = unsafe {
        DeviceViewMut::<T, _>::from_raw_parts_mut(
            FAKE_PTR + (1 << 30),
            rows * (c + 1),
            Ix2(rows, c + 1),
            &[c as isize + 1, 1],
            0,
            0,
            owner,
        )
    }
    .unwrap();
    let dst = padded.slice_move(s![.., ..c]);
    copy_path_steered(&dst, &src, steer)
}

#[test]
fn short_rows_into_a_slice_take_the_shifted_row_kernel_only_steered() {
    // u8 rows of 20 and 132 bytes (a vector group or more, under 256 bytes) in copies under
    // 1 MiB: the strided kernel by default, the shifted row kernel steered.
    for c in [20, 132] {
        assert_eq!(
            into_slice::<u8>(4096, c, Steer::Default),
            "strided32",
            "u8 rows of {c}"
        );
        assert_eq!(
            into_slice::<u8>(4096, c, Steer::ShiftedRows),
            "rows_shifted",
            "u8 rows of {c}"
        );
    }
    // Rows shorter than a vector group stay off it steered too.
    assert_eq!(into_slice::<u8>(4096, 9, Steer::ShiftedRows), "strided32");
    // From 256 bytes on the shifted row kernel takes them by default.
    for steer in [Steer::Default, Steer::ShiftedRows] {
        assert_eq!(
            into_slice::<u8>(4096, 1000, steer),
            "rows_shifted",
            "{steer:?}"
        );
        assert_eq!(
            into_slice::<f16>(4096, 513, steer),
            "rows_shifted",
            "{steer:?}"
        );
    }
    // 4-byte rows of 24 bytes or more: the scattered rows by default, the shifted row kernel
    // steered.
    assert_eq!(into_slice::<f32>(4096, 20, Steer::Default), "rows_scatter");
    assert_eq!(
        into_slice::<f32>(4096, 20, Steer::ShiftedRows),
        "rows_shifted"
    );
    assert_eq!(
        into_slice::<f32>(4096, 20, Steer::PreferScatter),
        "rows_scatter"
    );
}
