//! The storage kinds under a [`DeviceBase`](super::DeviceBase): [`SpanData`] and its sealed
//! crate-private access.

use crate::array::{CowSpan, OwnedSpan};
use crate::bytes::RawBytes;
use crate::element::DeviceElement;
use crate::span::{DeviceSpan, DeviceSpanMut};

pub(crate) mod sealed {
    use crate::bytes::RawBytes;

    /// Crate-private access to a view's storage; not nameable outside the crate.
    pub trait Sealed {
        /// The name of the alias over this storage, for `Debug`.
        const NAME: &'static str;
        fn raw(&self) -> &RawBytes<'_>;
        /// The storage of a read-only sub-view of `self`.
        fn ref_span(&self) -> <Self as super::SpanData>::Ref<'_>
        where
            Self: super::SpanData;
    }

    /// Storage that can be written through.
    pub trait SealedMut: Sealed {}

    /// Borrowed storage, which split halves can share.
    pub trait SealedView: Sealed {
        /// Two handles on the same span, for two layouts that reach disjoint elements.
        fn split_pair(self) -> (Self, Self)
        where
            Self: Sized;
        /// The bytes `start..end` of the span (in range), marked `shared` when `shared`.
        fn narrowed(self, start: usize, end: usize, shared: bool) -> Self
        where
            Self: Sized;
    }
}

/// The storage under a [`DeviceBase`](super::DeviceBase): a read-only [`DeviceSpan`], a writable
/// [`DeviceSpanMut`] or an owned [`OwnedSpan`]. Sealed; it plays the role of ndarray's `Data`.
///
/// ```
/// use devspan::{DeviceSpan, DeviceSpanMut, OwnedSpan, SpanData};
/// assert!(!<DeviceSpan<'static, f32> as SpanData>::WRITABLE);
/// assert!(<DeviceSpanMut<'static, f32> as SpanData>::WRITABLE);
/// assert!(<OwnedSpan<f32> as SpanData>::WRITABLE);
/// ```
pub trait SpanData: sealed::Sealed {
    /// The element type.
    type Elem: DeviceElement;
    /// Whether views over this storage may be written through.
    const WRITABLE: bool;
    /// The storage of the read-only sub-views that [`slice`](super::DeviceBase::slice),
    /// [`t`](super::DeviceBase::t), [`index_axis`](super::DeviceBase::index_axis),
    /// [`broadcast`](super::DeviceBase::broadcast) and their kin return: always a [`DeviceSpan`]. For a
    /// [`DeviceView<'a, ..>`](super::DeviceView) it is `DeviceSpan<'a, T>`, so sub-views of a read-only
    /// view keep its lifetime (`'static` views over foreign memory give `'static` sub-views);
    /// for arrays and mutable views it borrows `self`.
    type Ref<'s>: ViewData<Elem = Self::Elem> + Clone
    where
        Self: 's;
}

/// Storage that may be written through ([`DeviceSpanMut`], [`OwnedSpan`]); ndarray's `DataMut`.
pub trait SpanDataMut: SpanData + sealed::SealedMut {}

/// Borrowed storage ([`DeviceSpan`], [`DeviceSpanMut`]): what [`DeviceView`](super::DeviceView) and
/// [`DeviceViewMut`](super::DeviceViewMut) sit on.
pub trait ViewData: SpanData + sealed::SealedView {}

impl<T: DeviceElement> sealed::Sealed for DeviceSpan<'_, T> {
    const NAME: &'static str = "DeviceView";
    fn raw(&self) -> &RawBytes<'_> {
        &self.raw
    }
    fn ref_span(&self) -> <Self as SpanData>::Ref<'_> {
        self.clone()
    }
}

impl<T: DeviceElement> sealed::SealedView for DeviceSpan<'_, T> {
    fn split_pair(self) -> (Self, Self) {
        (self.clone(), self)
    }
    fn narrowed(self, start: usize, end: usize, shared: bool) -> Self {
        let mut raw = self.raw.sub(start, end);
        raw.shared |= shared;
        DeviceSpan::from_raw(raw)
    }
}

impl<T: DeviceElement> sealed::Sealed for DeviceSpanMut<'_, T> {
    const NAME: &'static str = "DeviceViewMut";
    fn raw(&self) -> &RawBytes<'_> {
        &self.raw
    }
    fn ref_span(&self) -> <Self as SpanData>::Ref<'_> {
        self.as_span()
    }
}

impl<T: DeviceElement> sealed::SealedMut for DeviceSpanMut<'_, T> {}

impl<T: DeviceElement> sealed::SealedView for DeviceSpanMut<'_, T> {
    fn split_pair(self) -> (Self, Self) {
        (DeviceSpanMut::from_raw(self.raw.clone()), self)
    }
    fn narrowed(self, start: usize, end: usize, shared: bool) -> Self {
        let mut raw = self.raw.sub(start, end);
        raw.shared |= shared;
        DeviceSpanMut::from_raw(raw)
    }
}

impl<T: DeviceElement> sealed::Sealed for OwnedSpan<T> {
    const NAME: &'static str = "DeviceArray";
    fn raw(&self) -> &RawBytes<'_> {
        OwnedSpan::raw(self)
    }
    fn ref_span(&self) -> <Self as SpanData>::Ref<'_> {
        DeviceSpan::from_raw(self.raw().clone())
    }
}

impl<T: DeviceElement> sealed::SealedMut for OwnedSpan<T> {}

impl<T: DeviceElement> sealed::Sealed for CowSpan<'_, T> {
    const NAME: &'static str = "DeviceCowArray";
    fn raw(&self) -> &RawBytes<'_> {
        match self {
            CowSpan::View(s) => &s.raw,
            CowSpan::Owned(s) => s.raw(),
        }
    }
    fn ref_span(&self) -> <Self as SpanData>::Ref<'_> {
        DeviceSpan::from_raw(sealed::Sealed::raw(self).clone())
    }
}

impl<T: DeviceElement> SpanData for CowSpan<'_, T> {
    type Elem = T;
    const WRITABLE: bool = false;
    type Ref<'s>
        = DeviceSpan<'s, T>
    where
        Self: 's;
}

impl<'a, T: DeviceElement> SpanData for DeviceSpan<'a, T> {
    type Elem = T;
    const WRITABLE: bool = false;
    type Ref<'s>
        = DeviceSpan<'a, T>
    where
        Self: 's;
}

impl<T: DeviceElement> SpanData for DeviceSpanMut<'_, T> {
    type Elem = T;
    const WRITABLE: bool = true;
    type Ref<'s>
        = DeviceSpan<'s, T>
    where
        Self: 's;
}

impl<T: DeviceElement> SpanData for OwnedSpan<T> {
    type Elem = T;
    const WRITABLE: bool = true;
    type Ref<'s>
        = DeviceSpan<'s, T>
    where
        Self: 's;
}

impl<T: DeviceElement> SpanDataMut for DeviceSpanMut<'_, T> {}
impl<T: DeviceElement> SpanDataMut for OwnedSpan<T> {}
impl<T: DeviceElement> ViewData for DeviceSpan<'_, T> {}
impl<T: DeviceElement> ViewData for DeviceSpanMut<'_, T> {}
