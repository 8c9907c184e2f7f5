//! Shapes whose element count overflows: layout constructors refuse them with a message that
//! names the shape, and the layouts they accept answer every query without overflowing.
//! Host only.

use std::panic::catch_unwind;

use devspan::{ErrorKind, Layout};
use ndarray::{Axis, Ix1, Ix2, Ix3, IxDyn};

/// `2^(bits / 2)`: two axes of this length hold `usize::MAX + 1` elements.
const HALF: usize = 1 << (usize::BITS / 2);

#[test]
fn contiguous_panics_with_a_message_naming_the_shape() {
    let r = catch_unwind(|| Layout::contiguous(Ix2(HALF, HALF)));
    let msg = match r {
        Ok(l) => panic!("accepted {l:?}"),
        Err(p) => p
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| format!("{p:?}")),
    };
    assert!(msg.starts_with("Layout::contiguous: "), "{msg}");
    assert!(msg.contains(&format!("{:?}", [HALF, HALF])), "{msg}");
}

#[test]
fn try_contiguous_refuses_shapes_over_isize_max_elements() {
    let max = isize::MAX as usize;
    let refused: [&[usize]; 6] = [
        &[HALF, HALF],
        &[0, HALF, HALF],
        &[HALF, HALF, 0],
        &[max + 1],
        &[2, max / 2 + 1],
        &[usize::MAX, 0],
    ];
    for shape in refused {
        let e = Layout::try_contiguous(IxDyn(shape)).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Overflow, "{shape:?}: {e}");
        assert!(e.to_string().contains(&format!("{shape:?}")), "{e}");
    }
    assert_eq!(
        Layout::try_contiguous(Ix2(HALF, HALF)).unwrap_err().kind(),
        &ErrorKind::Overflow
    );
}

/// The largest shapes `try_contiguous` accepts: the queries that multiply lengths and strides
/// (in plain arithmetic, which debug builds check) agree with the shape.
#[test]
fn largest_contiguous_layouts_answer_queries() {
    let max = isize::MAX as usize;
    let accepted: [&[usize]; 5] = [&[max], &[2, max / 2], &[0, max], &[max, 0], &[1, max, 1]];
    for shape in accepted {
        let l = Layout::try_contiguous(IxDyn(shape)).unwrap();
        let n: usize = shape.iter().product();
        assert_eq!(l.len(), n, "{l:?}");
        assert_eq!(l.is_empty(), n == 0, "{l:?}");
        assert!(l.is_standard_layout(), "{l:?}");
        assert!(l.is_dense(), "{l:?}");
        assert!(l.clone().reversed_axes().is_fortran_layout(), "{l:?}");
        let last: Vec<usize> = shape.iter().map(|&d| d.saturating_sub(1)).collect();
        assert_eq!(l.offset_of(&last), n.checked_sub(1), "{l:?}");
        assert_eq!(l.reshape(Ix1(n)).unwrap().len(), n, "{l:?}");
        assert_eq!(
            l.invert_axis(Axis(0)).unwrap().reach(),
            n.checked_sub(1).map(|m| (0, m)),
            "{l:?}"
        );
    }
    let l = Layout::try_contiguous(Ix3(2, 3, max / 6)).unwrap();
    assert!(l.reshape(Ix1(0)).is_err());
    assert!(Layout::contiguous(Ix2(0, max)).reshape(Ix1(0)).is_ok());
}

struct Fake;
impl devspan::DeviceOwner for Fake {}

/// Views check sizes in their own element size: an f64 view broadcast or reshaped to 2^62
/// elements would reach 2^65 bytes.
#[test]
fn view_broadcast_and_reshape_check_the_element_size() {
    // SAFETY: only metadata is read.
    let v = unsafe {
        devspan::DeviceView::<f64, _>::from_raw_parts(
            0x7f00_0000_0000,
            1,
            Ix1(1),
            &[1],
            0,
            0,
            std::sync::Arc::new(Fake),
        )
    }
    .unwrap();
    assert_eq!(
        v.broadcast(Ix1(1 << 62)).unwrap_err().kind(),
        &ErrorKind::Overflow
    );
    assert!(v.broadcast(Ix1(1 << 59)).is_ok());
    let empty = v.slice(ndarray::s![..0]);
    assert_eq!(
        empty
            .clone()
            .into_shape_with_order(Ix2(0, 1 << 62))
            .unwrap_err()
            .kind(),
        &ErrorKind::Overflow
    );
    assert!(empty.clone().into_shape_with_order(Ix2(0, 1 << 59)).is_ok());
    assert_eq!(
        empty.to_shape(Ix2(0, 1 << 62)).unwrap_err().kind(),
        &ErrorKind::Overflow
    );
}
