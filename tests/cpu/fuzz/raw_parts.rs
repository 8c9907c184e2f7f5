//! Target `raw_parts`: the constructors from raw parts (bytes, spans, views; read-only and
//! writable) and the 1-D operations on bytes and spans.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use devspan::ErrorKind::{self, *};
use devspan::{
    DeviceBytes, DeviceBytesMut, DeviceElement, DeviceOwner, DeviceSpan, DeviceSpanMut, DeviceView,
    DeviceViewMut,
};
use half::{bf16, f16};
use ndarray::{Ix2, IxDyn};

use super::model::{self, IMAX, Model};
use super::{Outcome, Rng, Verdict, expect_kinds};

/// An owner that counts its drops.
pub(crate) struct Counted(pub(crate) Arc<AtomicUsize>);

impl DeviceOwner for Counted {}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Owners handed out during one case, and how many of them were dropped.
#[derive(Default)]
pub(crate) struct Owners {
    made: AtomicUsize,
    dropped: Arc<AtomicUsize>,
}

impl Owners {
    pub(crate) fn owner(&self) -> Arc<dyn DeviceOwner> {
        self.made.fetch_add(1, Ordering::SeqCst);
        Arc::new(Counted(self.dropped.clone()))
    }

    /// `Err` unless every owner handed out has been dropped exactly once.
    pub(crate) fn all_dropped(&self) -> Result<(), String> {
        let (m, d) = (
            self.made.load(Ordering::SeqCst),
            self.dropped.load(Ordering::SeqCst),
        );
        ensure!(m == d, "{m} owners made, {d} dropped");
        Ok(())
    }
}

#[derive(Debug)]
pub(crate) struct Input {
    dtype: usize,
    other: usize,
    ptr: u64,
    byte_len: usize,
    device: usize,
    span_len: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    range: (Bound<usize>, Bound<usize>),
    mid: usize,
    chunk: usize,
}

fn bound(r: &mut Rng, len: usize) -> Bound<usize> {
    let v = match r.below(4) {
        0 => r.extreme_usize(),
        1 => len.wrapping_add(r.below(3)).wrapping_sub(1),
        _ => r.below(len.saturating_add(2).min(1 << 20)),
    };
    match r.below(5) {
        0 => Bound::Unbounded,
        1 => Bound::Excluded(v),
        2 => Bound::Included(v),
        _ => Bound::Excluded(v.min(len)),
    }
}

/// A layout that fits a span by construction (then perturbed now and then), or wild parts.
pub(crate) fn parts(r: &mut Rng) -> (Vec<usize>, Vec<isize>, usize, usize) {
    let rank = r.below(6);
    let shape: Vec<usize> = (0..rank).map(|_| r.len()).collect();
    let mut strides: Vec<isize> = (0..rank).map(|_| r.stride()).collect();
    if r.chance(30) {
        // Contiguous, in some axis order, with flips.
        let mut order: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            order.swap(i, r.below(i + 1));
        }
        let mut acc: isize = 1;
        for &k in order.iter().rev() {
            strides[k] = if r.chance(20) { -acc } else { acc };
            acc = acc.saturating_mul(shape[k].max(1).min(isize::MAX as usize) as isize);
        }
    }
    if r.chance(5) {
        // A stride list of the wrong length.
        if r.chance(50) || strides.is_empty() {
            strides.push(r.stride());
        } else {
            strides.pop();
        }
    }
    let m = Model::from_parts(&shape, &strides[..strides.len().min(rank)], 0);
    let (lo, hi) = match model::reach(&shape, &m.strides) {
        Ok(Some(x)) if strides.len() == rank => x,
        _ => (0, 0),
    };
    let slack = |r: &mut Rng| -> i128 {
        match r.below(6) {
            0 => -1,
            1 => 1,
            2 => r.below(4) as i128,
            _ => 0,
        }
    };
    let offset = (-lo + slack(r)).clamp(0, u64::MAX as i128) as usize;
    let span_len = (offset as i128 + hi + 1 + slack(r)).clamp(0, u64::MAX as i128) as usize;
    match r.below(10) {
        0 => (shape, strides, r.extreme_usize(), span_len),
        1 => (shape, strides, offset, r.extreme_usize()),
        _ => (shape, strides, offset, span_len),
    }
}

pub(crate) fn generate(r: &mut Rng) -> Input {
    let (shape, strides, offset, span_len) = parts(r);
    let byte_len = match r.below(4) {
        0 => r.extreme_usize(),
        1 => r.below(64),
        _ => span_len.wrapping_mul(1 << r.below(4)),
    };
    Input {
        dtype: r.below(8),
        other: r.below(3),
        ptr: r.ptr(),
        byte_len,
        device: if r.chance(90) {
            r.below(4)
        } else {
            r.extreme_usize()
        },
        span_len,
        shape,
        strides,
        offset,
        range: (bound(r, byte_len), bound(r, byte_len)),
        mid: if r.chance(70) {
            r.below(byte_len.saturating_add(2).min(1 << 20))
        } else {
            r.extreme_usize()
        },
        chunk: match r.below(5) {
            0 => 0,
            1 => r.extreme_usize(),
            _ => 1 + r.below(8),
        },
    }
}

/// Kinds `RawBytes::new` may answer.
fn bytes_errors(ptr: u64, len: usize) -> Vec<ErrorKind> {
    let mut e = Vec::new();
    if ptr == 0 && len != 0 {
        e.push(InvalidArgument);
    }
    if len as i128 > IMAX || ptr as i128 + len as i128 > u64::MAX as i128 {
        e.push(Overflow);
    }
    e
}

/// `(start, end)` of `range` over `len`, or the kinds the range resolution may answer.
fn resolve(
    range: (Bound<usize>, Bound<usize>),
    len: usize,
) -> Result<(usize, usize), Vec<ErrorKind>> {
    let start = match range.0 {
        Bound::Included(s) => s as i128,
        Bound::Excluded(s) => s as i128 + 1,
        Bound::Unbounded => 0,
    };
    let end = match range.1 {
        Bound::Included(e) => e as i128 + 1,
        Bound::Excluded(e) => e as i128,
        Bound::Unbounded => len as i128,
    };
    if start > usize::MAX as i128 || end > usize::MAX as i128 || start > end || end > len as i128 {
        return Err(vec![OutOfBounds]);
    }
    Ok((start as usize, end as usize))
}

fn misaligned(ptr: u64, bytes: usize, size: usize, align: usize) -> Vec<ErrorKind> {
    if ptr % align as u64 != 0 || bytes % size != 0 {
        vec![Misaligned]
    } else {
        Vec::new()
    }
}

/// Runs the case with `T` the element type and `U` the reinterpretation target.
fn typed<T: DeviceElement, U: DeviceElement>(inp: &Input, owners: &Owners) -> Verdict {
    let size = std::mem::size_of::<T>();
    let align = std::mem::align_of::<T>();
    // Bytes: the four constructors.
    let berr = bytes_errors(inp.ptr, inp.byte_len);
    // SAFETY: the address is never dereferenced; only metadata is read.
    let b =
        unsafe { DeviceBytes::from_raw_parts(inp.ptr, inp.byte_len, inp.device, owners.owner()) };
    expect_kinds("DeviceBytes::from_raw_parts", &b, &berr)?;
    // SAFETY: as above.
    let bb = unsafe { DeviceBytes::from_raw_parts_borrowed(inp.ptr, inp.byte_len, inp.device) };
    expect_kinds("DeviceBytes::from_raw_parts_borrowed", &bb, &berr)?;
    // SAFETY: as above.
    let bm = unsafe {
        DeviceBytesMut::from_raw_parts(inp.ptr, inp.byte_len, inp.device, owners.owner())
    };
    expect_kinds("DeviceBytesMut::from_raw_parts", &bm, &berr)?;
    // SAFETY: as above.
    let bmb = unsafe { DeviceBytesMut::from_raw_parts_borrowed(inp.ptr, inp.byte_len, inp.device) };
    expect_kinds("DeviceBytesMut::from_raw_parts_borrowed", &bmb, &berr)?;

    if let (Ok(b), Ok(mut bm)) = (b, bm) {
        ensure!(
            (b.len(), b.device_ptr(), b.device(), b.is_empty())
                == (inp.byte_len, inp.ptr, inp.device, inp.byte_len == 0),
            "DeviceBytes metadata differs"
        );
        ensure!(
            (bm.len(), bm.device_ptr(), bm.device()) == (inp.byte_len, inp.ptr, inp.device),
            "DeviceBytesMut metadata differs"
        );
        // slice / split_at / typed, read-only and writable.
        let want = resolve(inp.range, inp.byte_len);
        let got = b.slice(inp.range);
        expect_kinds(
            "DeviceBytes::slice",
            &got,
            want.as_ref().err().map_or(&[], |v| &v[..]),
        )?;
        if let (Ok(s), Ok((a, e))) = (&got, &want) {
            ensure!(
                (s.device_ptr(), s.len()) == (inp.ptr + *a as u64, e - a),
                "DeviceBytes::slice gave {:#x}+{}",
                s.device_ptr(),
                s.len()
            );
        }
        let got_mut = bm.reborrow().slice_mut(inp.range);
        expect_kinds(
            "DeviceBytesMut::slice_mut",
            &got_mut,
            want.as_ref().err().map_or(&[], |v| &v[..]),
        )?;
        if let (Ok(s), Ok((a, e))) = (&got_mut, &want) {
            ensure!(
                (s.device_ptr(), s.len()) == (inp.ptr + *a as u64, e - a),
                "DeviceBytesMut::slice_mut differs"
            );
        }
        drop(got_mut);
        let split_err = if inp.mid > inp.byte_len {
            vec![OutOfBounds]
        } else {
            vec![]
        };
        let sp = b.split_at(inp.mid);
        expect_kinds("DeviceBytes::split_at", &sp, &split_err)?;
        if let Ok((x, y)) = &sp {
            ensure!(
                (x.len(), y.len(), y.device_ptr())
                    == (inp.mid, inp.byte_len - inp.mid, inp.ptr + inp.mid as u64)
                    && x.device_ptr() == inp.ptr,
                "DeviceBytes::split_at differs"
            );
        }
        let spm = bm.reborrow().split_at_mut(inp.mid);
        expect_kinds("DeviceBytesMut::split_at_mut", &spm, &split_err)?;
        drop(spm);

        let terr = misaligned(inp.ptr, inp.byte_len, size, align);
        let span = b.clone().typed::<T>();
        expect_kinds("DeviceBytes::typed", &span, &terr)?;
        let span_mut = bm.typed_mut::<T>();
        expect_kinds("DeviceBytesMut::typed_mut", &span_mut, &terr)?;
        if let (Ok(span), Ok(span_mut)) = (span, span_mut) {
            span_ops::<T, U>(inp, span, span_mut)?;
        }
    }

    // Views from raw parts.
    let rank = inp.shape.len();
    let bytes = inp.span_len as i128 * size as i128;
    let mut verr = Vec::new();
    if bytes > usize::MAX as i128 {
        verr.push(Overflow);
    } else {
        verr.extend(bytes_errors(inp.ptr, bytes as usize));
        verr.extend(misaligned(inp.ptr, bytes as usize, size, align));
    }
    let strides: Vec<i128> = inp.strides.iter().map(|&s| s as i128).collect();
    verr.extend(model::layout_errors(
        &inp.shape,
        &strides,
        inp.offset as i128,
        inp.span_len as i128,
        size,
    ));
    let valid = verr.is_empty();
    // SAFETY: the address is never dereferenced; only metadata is read.
    let v = unsafe {
        DeviceView::<T, _>::from_raw_parts(
            inp.ptr,
            inp.span_len,
            IxDyn(&inp.shape),
            &inp.strides,
            inp.offset,
            inp.device,
            owners.owner(),
        )
    };
    // The case's outcome is that of `DeviceView::from_raw_parts`; every other call is checked
    // against the model all the same.
    let outcome = expect_kinds("DeviceView::from_raw_parts", &v, &verr)?;
    let m = Model::from_parts(
        &inp.shape,
        &inp.strides[..inp.strides.len().min(rank)],
        inp.offset,
    );
    if let Ok(v) = &v {
        m.same_as(v.shape(), v.strides(), v.layout().offset())?;
        ensure!(
            v.device_ptr() as i128 == inp.ptr as i128 + inp.offset as i128 * size as i128,
            "device_ptr {:#x}",
            v.device_ptr()
        );
        let s = v.span().map_err(|e| format!("span(): {e}"))?;
        ensure!(
            (s.device_ptr(), s.len(), v.device()) == (inp.ptr, inp.span_len, inp.device),
            "span differs"
        );
        ensure!(v.stream().is_none(), "a raw view has a stream");
        ensure!(
            v.len() as i128 == model::count(&inp.shape),
            "len {}",
            v.len()
        );
    }
    if rank == 2 {
        // The same parts with a fixed dimension type.
        // SAFETY: as above.
        let v2 = unsafe {
            DeviceView::<T, _>::from_raw_parts(
                inp.ptr,
                inp.span_len,
                Ix2(inp.shape[0], inp.shape[1]),
                &inp.strides,
                inp.offset,
                inp.device,
                owners.owner(),
            )
        };
        expect_kinds("DeviceView::<Ix2>::from_raw_parts", &v2, &verr)?;
    }
    let mut werr = verr.clone();
    let unaliased = valid && model::unaliased_rule(&inp.shape, &m.strides);
    if valid && !unaliased {
        werr.push(Aliasing);
    }
    // SAFETY: as above.
    let w = unsafe {
        DeviceViewMut::<T, _>::from_raw_parts_mut(
            inp.ptr,
            inp.span_len,
            IxDyn(&inp.shape),
            &inp.strides,
            inp.offset,
            inp.device,
            owners.owner(),
        )
    };
    expect_kinds("DeviceViewMut::from_raw_parts_mut", &w, &werr)?;
    if let Ok(w) = &w {
        m.same_as(w.shape(), w.strides(), w.layout().offset())?;
        if let Some(offs) = model::brute_offsets(&m) {
            let mut sorted = offs.clone();
            sorted.sort_unstable();
            ensure!(
                sorted.windows(2).all(|p| p[0] != p[1]),
                "a writable view reaches an element twice"
            );
        }
    }
    // from_span / from_span_mut agree with from_raw_parts when the span itself is fine.
    if bytes <= IMAX
        && bytes_errors(inp.ptr, bytes as usize).is_empty()
        && misaligned(inp.ptr, bytes as usize, size, align).is_empty()
    {
        // SAFETY: as above.
        let span =
            unsafe { DeviceBytes::from_raw_parts_borrowed(inp.ptr, bytes as usize, inp.device) }
                .and_then(|b| b.typed::<T>())
                .map_err(|e| format!("span: {e}"))?;
        let fs = DeviceView::from_span(span, IxDyn(&inp.shape), &inp.strides, inp.offset);
        expect_kinds("DeviceView::from_span", &fs, &verr)?;
        // SAFETY: as above.
        let span =
            unsafe { DeviceBytesMut::from_raw_parts_borrowed(inp.ptr, bytes as usize, inp.device) }
                .and_then(|b| b.typed_mut::<T>())
                .map_err(|e| format!("span: {e}"))?;
        let fs = DeviceViewMut::from_span_mut(span, IxDyn(&inp.shape), &inp.strides, inp.offset);
        expect_kinds("DeviceViewMut::from_span_mut", &fs, &werr)?;
    }
    Ok(outcome)
}

fn span_ops<T: DeviceElement, U: DeviceElement>(
    inp: &Input,
    span: DeviceSpan<'static, T>,
    span_mut: DeviceSpanMut<'static, T>,
) -> Verdict {
    let size = std::mem::size_of::<T>();
    let len = span.len();
    ensure!(len == inp.byte_len / size, "span of {len} elements");
    let at = |i: usize| span.device_ptr() + (i * size) as u64;
    let mut outcome = Outcome::Ok;
    let want = resolve(inp.range, len);
    let wk = want.as_ref().err().map_or(&[][..], |v| &v[..]);
    let s = span.slice(inp.range);
    if let Outcome::Err(k) = expect_kinds("DeviceSpan::slice", &s, wk)? {
        outcome = Outcome::Err(k);
    }
    if let (Ok(s), Ok((a, e))) = (&s, &want) {
        ensure!(
            (s.device_ptr(), s.len()) == (at(*a), e - a),
            "DeviceSpan::slice differs"
        );
    }
    let split_err = if inp.mid > len {
        vec![OutOfBounds]
    } else {
        vec![]
    };
    let sp = span.split_at(inp.mid);
    expect_kinds("DeviceSpan::split_at", &sp, &split_err)?;
    if let Ok((x, y)) = &sp {
        ensure!(
            (x.len(), y.len(), y.device_ptr()) == (inp.mid, len - inp.mid, at(inp.mid)),
            "DeviceSpan::split_at differs"
        );
    }
    let chunk_err = if inp.chunk == 0 {
        vec![InvalidArgument]
    } else {
        vec![]
    };
    let ch = span.chunks(inp.chunk);
    expect_kinds("DeviceSpan::chunks", &ch, &chunk_err)?;
    if let Ok(ch) = ch {
        let n = len.div_ceil(inp.chunk);
        ensure!(
            ch.size_hint() == (n, Some(n)),
            "{} chunks of {len}: size_hint {:?}",
            inp.chunk,
            ch.size_hint()
        );
        for (i, c) in ch.take(3).enumerate() {
            let start = i * inp.chunk;
            ensure!(
                (c.device_ptr(), c.len()) == (at(start), inp.chunk.min(len - start)),
                "chunk {i} differs"
            );
        }
    }
    let rerr = misaligned(
        span.device_ptr(),
        len * size,
        std::mem::size_of::<U>(),
        std::mem::align_of::<U>(),
    );
    let re = span.reinterpret::<U>();
    expect_kinds("DeviceSpan::reinterpret", &re, &rerr)?;
    if let Ok(re) = &re {
        ensure!(
            re.len() * std::mem::size_of::<U>() == len * size,
            "reinterpret length"
        );
    }
    let v = span.clone().into_view();
    ensure!(
        v.shape() == [len]
            && (len <= 1 || v.strides() == [1])
            && v.device_ptr() == span.device_ptr(),
        "into_view differs"
    );
    // The writable twins, each on its own reborrow.
    let mut sm = span_mut;
    expect_kinds(
        "DeviceSpanMut::slice_mut",
        &sm.reborrow().slice_mut(inp.range),
        wk,
    )?;
    expect_kinds(
        "DeviceSpanMut::split_at_mut",
        &sm.reborrow().split_at_mut(inp.mid),
        &split_err,
    )?;
    {
        let chm = sm.reborrow().chunks_mut(inp.chunk);
        expect_kinds("DeviceSpanMut::chunks_mut", &chm, &chunk_err)?;
        if let Ok(chm) = chm {
            let n = len.div_ceil(inp.chunk);
            ensure!(chm.size_hint() == (n, Some(n)), "chunks_mut size_hint");
            for c in chm.take(2) {
                ensure!(c.len() <= inp.chunk, "chunk_mut too long");
            }
        }
    }
    expect_kinds(
        "DeviceSpanMut::reinterpret_mut",
        &sm.reborrow().reinterpret_mut::<U>(),
        &rerr,
    )?;
    let vm = sm.into_view_mut();
    ensure!(vm.shape() == [len], "into_view_mut differs");
    Ok(outcome)
}

fn dispatch<T: DeviceElement>(inp: &Input, owners: &Owners) -> Verdict {
    match inp.other {
        0 => typed::<T, u8>(inp, owners),
        1 => typed::<T, u32>(inp, owners),
        _ => typed::<T, f64>(inp, owners),
    }
}

fn check(inp: &Input) -> Verdict {
    let owners = Owners::default();
    let r = match inp.dtype {
        0 => dispatch::<u8>(inp, &owners),
        1 => dispatch::<u16>(inp, &owners),
        2 => dispatch::<f32>(inp, &owners),
        3 => dispatch::<f64>(inp, &owners),
        4 => dispatch::<i64>(inp, &owners),
        5 => dispatch::<bf16>(inp, &owners),
        6 => dispatch::<f16>(inp, &owners),
        _ => dispatch::<i32>(inp, &owners),
    }?;
    owners.all_dropped()?;
    Ok(r)
}

#[test]
fn raw_parts() {
    super::run("raw_parts", 5000, generate, check);
}
