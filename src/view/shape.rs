//! Shape operations on views: a dynamic or fixed number of axes, and new shapes over the same
//! elements, without a copy (`into_shape_with_order`) or with one where the layout needs it
//! (`to_shape`).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::{Dimension, Order, ShapeArg};

use super::{DeviceBase, SpanData};
use crate::array::DeviceCowArray;
use crate::error::{ErrorKind, Result};
use crate::layout::Layout;

impl<S: SpanData, D: Dimension> DeviceBase<S, D> {
    /// The view with a dynamic number of axes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().into_dyn().ndim(), 2);
    /// # Ok(()) }
    /// ```
    pub fn into_dyn(self) -> DeviceBase<S, ndarray::IxDyn> {
        let l = self.layout.clone().into_dyn();
        self.with_layout(l)
    }

    /// The view with a fixed number of axes, or `Err(ShapeMismatch)`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let v = a.view().into_dyn().into_dimensionality::<ndarray::Ix2>()?;
    /// assert_eq!(v.dim(), ndarray::Ix2(2, 3));
    /// # Ok(()) }
    /// ```
    pub fn into_dimensionality<E: Dimension>(self) -> Result<DeviceBase<S, E>> {
        let l = self.layout.clone().into_dimensionality::<E>()?;
        Ok(self.with_layout(l))
    }

    /// The same elements with a new shape, consuming `self`, with no copy (ndarray's
    /// `into_shape_with_order`). The elements are read in row-major order, or in the order given
    /// with the shape (`((3, 4), Order::ColumnMajor)`). `Err(ShapeMismatch)` when the element
    /// counts differ, `Err(IncompatibleLayout)` when the strides do not allow it without a copy
    /// (see [`Layout::reshape`]); unlike ndarray's, it also reshapes strided layouts whose axes
    /// can be regrouped. [`to_shape`](Self::to_shape) copies where needed.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Order;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 12)?;
    /// let v = a.view().into_shape_with_order((3, 4))?;
    /// assert_eq!(v.strides(), &[4, 1]);
    /// assert!(v.t().into_shape_with_order(12).is_err());
    /// let f = a.into_shape_with_order(((3, 4), Order::ColumnMajor))?;
    /// assert_eq!(f.strides(), &[1, 3]);
    /// # Ok(()) }
    /// ```
    pub fn into_shape_with_order<E: ShapeArg>(self, shape: E) -> Result<DeviceBase<S, E::Dim>> {
        let l = reshape_layout(&self.layout, shape, std::mem::size_of::<S::Elem>())?;
        Ok(self.with_layout(l))
    }

    /// The elements with a new shape (ndarray's `to_shape`): a view when the layout allows it
    /// without a copy, otherwise a standard-layout copy made on the memory's stream. Elements are
    /// read in row-major order, or in the order given with the shape
    /// (`((3, 4), Order::ColumnMajor)`); `Err(ShapeMismatch)` when the element counts differ.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{array, Order};
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::from_host(&stream, &array![[1u8, 2, 3], [4, 5, 6]])?;
    /// assert!(a.to_shape((3, 2))?.is_view());
    /// assert_eq!(a.to_shape(((3, 2), Order::ColumnMajor))?.to_host()?, array![[1u8, 5], [4, 3], [2, 6]]);
    /// assert!(a.to_shape(7).is_err());
    /// # Ok(()) }
    /// ```
    pub fn to_shape<E: ShapeArg>(&self, shape: E) -> Result<DeviceCowArray<'_, S::Elem, E::Dim>> {
        self.to_shape_impl(None, shape)
    }

    /// [`to_shape`](Self::to_shape), copying (when it must) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let t = a.t();
    /// assert!(t.to_shape_on(&stream, 6)?.is_owned());
    /// # Ok(()) }
    /// ```
    pub fn to_shape_on<E: ShapeArg>(
        &self,
        stream: &Arc<CudaStream>,
        shape: E,
    ) -> Result<DeviceCowArray<'_, S::Elem, E::Dim>> {
        self.to_shape_impl(Some(stream), shape)
    }

    fn to_shape_impl<E: ShapeArg>(
        &self,
        stream: Option<&Arc<CudaStream>>,
        shape: E,
    ) -> Result<DeviceCowArray<'_, S::Elem, E::Dim>> {
        let (dim, order) = shape.into_shape_and_order();
        let order = order.unwrap_or(Order::RowMajor);
        match reshape_layout(
            &self.layout,
            (dim.clone(), order),
            std::mem::size_of::<S::Elem>(),
        ) {
            Ok(l) => return Ok(DeviceCowArray::borrowed(self.view().with_layout(l))),
            Err(e) if e.kind() != &ErrorKind::IncompatibleLayout => return Err(e),
            Err(_) => {}
        }
        let stream = match stream {
            Some(s) => s.clone(),
            None => self.own_stream("to_shape")?,
        };
        // A copy contiguous in the order the elements are read (column-major: the transpose's
        // standard copy, transposed back), which reshapes in that order without a copy.
        let copy = match order {
            Order::ColumnMajor => self.t().to_contiguous_on(&stream)?.reversed_axes(),
            _ => self.to_contiguous_on(&stream)?,
        };
        Ok(DeviceCowArray::owned(
            copy.into_shape_with_order((dim, order))?,
        ))
    }
}

/// `layout` reshaped without a copy, reading elements in the order `shape` asks for.
pub(crate) fn reshape_layout<D: Dimension, E: ShapeArg>(
    layout: &Layout<D>,
    shape: E,
    elem_size: usize,
) -> Result<Layout<E::Dim>> {
    let (dim, order) = shape.into_shape_and_order();
    match order.unwrap_or(Order::RowMajor) {
        Order::ColumnMajor => {
            let mut rev = dim;
            rev.slice_mut().reverse();
            Ok(layout
                .clone()
                .reversed_axes()
                .reshape_sized(rev, elem_size)?
                .reversed_axes())
        }
        _ => layout.reshape_sized(dim, elem_size),
    }
}
