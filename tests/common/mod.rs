//! Helpers shared by the GPU test binaries: random host data, bitwise comparisons that treat
//! NaNs of one type as equal, and axis permutations. Each test binary uses a subset.
#![allow(dead_code)]

use devspan::DeviceElement;
use ndarray::{Array, ArrayD, ArrayViewD, Dimension, IxDyn};
use rand::{Rng, rngs::StdRng};

/// An array of `shape` holding random bits (every bit pattern, NaNs included; never zeros).
pub fn random<T: DeviceElement>(rng: &mut StdRng, shape: &[usize]) -> ArrayD<T> {
    let n: usize = shape.iter().product();
    let mut words = vec![0u64; (n * std::mem::size_of::<T>()).div_ceil(8)];
    rng.fill(words.as_mut_slice());
    let bytes: &[u8] = &bytemuck::cast_slice::<u64, u8>(&words)[..n * std::mem::size_of::<T>()];
    Array::from_shape_vec(IxDyn(shape), bytemuck::cast_slice::<u8, T>(bytes).to_vec()).unwrap()
}

/// The bit patterns of `a`'s elements, in logical order.
pub fn bits<T: DeviceElement, D: Dimension>(a: &Array<T, D>) -> Vec<u64> {
    a.iter().map(|x| x.to_bits_u64()).collect()
}

/// Bitwise equality, except that any two NaNs of a float type compare equal.
pub fn same_bits<T: DeviceElement>(a: &T, b: &T) -> bool {
    if bytemuck::bytes_of(a) == bytemuck::bytes_of(b) {
        return true;
    }
    let nan = |x: &T| {
        let bits = x.to_bits_u64();
        match T::DTYPE {
            devspan::DType::F16 => (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0,
            devspan::DType::BF16 => (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0,
            devspan::DType::F32 => f32::from_bits(bits as u32).is_nan(),
            devspan::DType::F64 => f64::from_bits(bits).is_nan(),
            _ => false,
        }
    };
    nan(a) && nan(b)
}

/// Asserts that `got` and `expect` have the same shape and the same elements ([`same_bits`]),
/// naming up to five differing indices.
#[track_caller]
pub fn assert_same<T: DeviceElement>(
    got: &ArrayViewD<'_, T>,
    expect: &ArrayViewD<'_, T>,
    what: &str,
) {
    assert_eq!(got.shape(), expect.shape(), "{what}: shape");
    // Fast path: both in standard layout and equal.
    if let (Some(g), Some(e)) = (got.as_slice(), expect.as_slice())
        && g.iter().zip(e).all(|(a, b)| same_bits(a, b))
    {
        return;
    }
    let mut bad = Vec::new();
    let mut count = 0;
    for ((i, g), e) in got.indexed_iter().zip(expect.iter()) {
        if !same_bits(g, e) {
            count += 1;
            if bad.len() < 5 {
                bad.push(format!("{:?}: got {g} expected {e}", i.slice()));
            }
        }
    }
    assert!(
        count == 0,
        "{what}: {count} of {} elements differ, first: {bad:?}",
        got.len()
    );
}

/// Every permutation of `0..rank`.
pub fn permutations(rank: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for _ in 0..rank {
        out = out
            .into_iter()
            .flat_map(|p: Vec<usize>| {
                (0..rank)
                    .filter(|a| !p.contains(a))
                    .map(|a| [p.clone(), vec![a]].concat())
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    out
}
