//! Size checks of the layout operations that views call with their element size.

use ndarray::{Ix1, Ix2, Ix3};

use super::Layout;
use crate::ErrorKind;

#[test]
fn broadcast_checks_the_element_size() {
    let one = Layout::contiguous(Ix1(1));
    // 2^62 elements: fine as bytes, 2^65 bytes of f64.
    assert_eq!(one.broadcast(Ix1(1 << 62)).unwrap().shape(), &[1 << 62]);
    assert_eq!(
        one.broadcast_sized(Ix1(1 << 62), 1).unwrap().strides(),
        &[0]
    );
    let e = one.broadcast_sized(Ix1(1 << 62), 8).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Overflow, "{e}");
    assert!(e.to_string().contains("8-byte"), "{e}");
    assert!(one.broadcast_sized(Ix2(1 << 30, 1 << 29), 8).is_ok());
    // An empty layout broadcasts to empty shapes only; their nonzero lengths count.
    let empty = Layout::contiguous(Ix1(0));
    assert!(empty.broadcast_sized(Ix2(1 << 59, 0), 8).is_ok());
    let e = empty.broadcast_sized(Ix2(1 << 60, 0), 8).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Overflow, "{e}");
}

#[test]
fn reshape_checks_the_element_size() {
    // An empty layout reshapes to any empty shape whose nonzero lengths fit.
    let empty = Layout::contiguous(Ix1(0));
    assert_eq!(
        empty.reshape(Ix2(0, 1 << 62)).unwrap().shape(),
        &[0, 1 << 62]
    );
    let e = empty.reshape_sized(Ix2(0, 1 << 62), 8).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Overflow, "{e}");
    assert!(empty.reshape_sized(Ix2(0, 1 << 59), 8).is_ok());
    // A nonempty layout keeps its element count; the bytes are checked all the same.
    let l = Layout::new_strided(Ix1(1 << 62), &[1], 0, 1 << 62).unwrap();
    assert!(l.reshape_sized(Ix2(1 << 31, 1 << 31), 1).is_ok());
    let e = l.reshape_sized(Ix2(1 << 31, 1 << 31), 2).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Overflow, "{e}");
    assert!(
        Layout::contiguous(Ix3(2, 3, 4))
            .reshape_sized(Ix2(6, 4), 8)
            .is_ok()
    );
}

#[test]
fn reachable_offsets_past_isize_max_are_an_overflow() {
    // A span longer than isize::MAX elements: the last element, at offset 3 + 2 * (2^62 - 1) =
    // 2^63 + 1, lies in the span but past isize::MAX.
    let span = (1usize << 63) + 2;
    let e = Layout::new_strided(Ix1(1 << 62), &[2], 3, span).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Overflow, "{e}");
    assert!(e.to_string().contains("isize"), "{e}");
    // One element less reaches isize::MAX at most.
    let l = Layout::new_strided(Ix1(1 << 62), &[2], 1, span).unwrap();
    assert_eq!(l.reach(), Some((1, isize::MAX as usize)));
    // Past the span's end it stays out of bounds.
    let e = Layout::new_strided(Ix1(3), &[2], 1, 5).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::OutOfBounds, "{e}");
}
