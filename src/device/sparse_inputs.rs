//! Products with a sparse input on a [`Device`] (docs/FORMAT.md, "Sparse vectors"): y = A·x
//! with x a [`SparseVector`], and the transposed product y = Aᵀ·x with x dense or sparse, which
//! reads only the rows of A that x's non-zeros select. The checks that do not depend on the
//! backend happen here, as in device.rs; the CPU multiplies every format, wgpu (shaders/README.md,
//! "Transposed products with a sparse x", "Products with a sparse x") and CUDA
//! (kernels/README.md, "Products with a sparse input") have y = Aᵀ·x and y = A·x with x sparse
//! for CSR, homogeneous CSR and MACKO with binary16 values, and the GPU backends refuse the
//! rest with `Error::Unsupported` until their kernels exist.

use macko_format::SparseVector;

use super::{precision_name, Device, DeviceMatrix, DeviceVector};
use crate::backend::Precision;
use crate::dispatch::{AnySparseInput, AnySparseVector};
use crate::error::{Error, Result};

/// A sparse vector on a device ([`Device::upload_sparse_vector`]): the x of
/// [`Device::spmv_sparse_x`] and [`Device::spmv_transposed_sparse_x`]. Usable only with the
/// device that made it.
pub struct DeviceSparseVector {
    device: u64,
    len: usize,
    nnz: usize,
    storage: AnySparseVector,
}

/// A sparse vector can be shared by threads like the other handles; this fails to compile if a
/// backend's sparse vector loses `Send` or `Sync`.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<DeviceSparseVector>();
};

impl DeviceSparseVector {
    /// Number of elements, stored or not.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the vector has no element at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Number of stored entries of the [`SparseVector`] it was uploaded from.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
}

/// One of the products with a sparse input, named with its x: what
/// [`Device::time_sparse_input`] repeats.
#[derive(Clone, Copy)]
pub enum SparseInputProduct<'a> {
    /// y = A·x with x sparse ([`Device::spmv_sparse_x`]).
    SparseX(&'a DeviceSparseVector),
    /// y = Aᵀ·x with x dense ([`Device::spmv_transposed`]).
    Transposed(&'a DeviceVector),
    /// y = Aᵀ·x with x sparse ([`Device::spmv_transposed_sparse_x`]).
    TransposedSparseX(&'a DeviceSparseVector),
}

impl SparseInputProduct<'_> {
    /// The backend's view: its x, and whether the product is transposed.
    fn input(&self) -> (AnySparseInput<'_>, bool) {
        match *self {
            SparseInputProduct::SparseX(x) => (AnySparseInput::Sparse(&x.storage), false),
            SparseInputProduct::Transposed(x) => (AnySparseInput::Dense(&x.storage), true),
            SparseInputProduct::TransposedSparseX(x) => (AnySparseInput::Sparse(&x.storage), true),
        }
    }
}

/// `found == expected`, else a shape mismatch naming `what`.
fn same(what: &'static str, expected: usize, found: usize) -> Result<()> {
    if expected != found {
        return Err(Error::ShapeMismatch {
            what,
            expected,
            found,
        });
    }
    Ok(())
}

/// y is a single vector (these products multiply one x).
fn single_y(y: &DeviceVector) -> Result<()> {
    same(
        "vectors in y (products with a sparse input multiply one vector)",
        1,
        y.batch,
    )
}

impl Device {
    /// Copies a sparse vector (indices and values, already validated by [`SparseVector`]) to
    /// the device: its non-zero entries (stored ±0 dropped). Every backend takes it; which
    /// products then multiply it depends on the backend and the matrix's format (see each
    /// product).
    pub fn upload_sparse_vector(&self, x: &SparseVector) -> Result<DeviceSparseVector> {
        Ok(DeviceSparseVector {
            device: self.id,
            len: x.len(),
            nnz: x.nnz(),
            storage: self.backend.upload_sparse_vector(x)?,
        })
    }

    /// Enqueues y = A·x for a sparse x of `cols` elements into y (`rows` elements, f16 or f32),
    /// accumulated in f32. Only x's non-zero elements contribute: a column where x is zero adds
    /// nothing, even a NaN or ±∞ of A there (`reference::spmv_sparse_x`). The formats are
    /// row-major, so the CPU reads every row of A and skips the entries under x's zeros (see
    /// its `sparse_inputs.rs`), as CUDA (CSR, homogeneous CSR and MACKO with binary16 values,
    /// x scattered into a dense copy first; a MACKO matrix whose values are all finite then
    /// runs its own kernels) and wgpu (CSR, homogeneous CSR and MACKO with binary16 values:
    /// the matrix's own kernel over x's dense copy, made at its upload) do; their other formats
    /// (quantized MACKO included) refuse with [`Error::Unsupported`]
    /// (`what` = [`crate::backend::UNSUPPORTED_SPARSE_X`]).
    /// For a product whose bytes follow nnz(x), see [`Device::spmv_transposed_sparse_x`].
    ///
    /// ```
    /// use macko::format::{f16, SparseVector};
    /// use macko::{BackendKind, CsrMatrix, DenseMatrix, Device, Precision};
    ///
    /// let dev = Device::new(BackendKind::Cpu)?; // every format on the CPU
    /// let w = [1.0, 2.0, 0.0, 3.0, 0.0, 4.0].map(f16::from_f32).to_vec();
    /// let a = CsrMatrix::from_dense(&DenseMatrix::new(2, 3, w)?)?;
    /// let x = SparseVector::new(3, vec![2], vec![f16::from_f32(10.0)])?; // x = [0, 0, 10]
    /// let a = dev.upload(&a)?;
    /// let x = dev.upload_sparse_vector(&x)?;
    /// let mut y = dev.zeros(2, Precision::F32)?;
    /// dev.spmv_sparse_x(&a, &x, &mut y)?;
    /// assert_eq!(dev.download(&y)?.to_f32(), [0.0, 40.0]);
    /// # Ok::<(), macko::Error>(())
    /// ```
    pub fn spmv_sparse_x(
        &self,
        a: &DeviceMatrix,
        x: &DeviceSparseVector,
        y: &mut DeviceVector,
    ) -> Result<()> {
        self.check_sparse_input(a, SparseInputProduct::SparseX(x), y)?;
        self.backend
            .multiply_sparse_x(&a.storage, &x.storage, &mut y.storage)
    }

    /// Enqueues the transposed product y = Aᵀ·x: x has one f16 element per row of A, y (f16 or
    /// f32) one per column, y\[c\] = Σᵢ A\[i, c\]·x\[i\], accumulated in f32. Rows of A where x is
    /// ±0 contribute nothing and are not read: the CPU scans x for its non-zeros and reads only
    /// the rows they select, scattering each into y (`reference::spmv_transposed`). A sparse
    /// format's zero values add nothing even where x is NaN or ±∞; dense is IEEE. wgpu and CUDA
    /// multiply CSR, homogeneous CSR and MACKO with binary16 values (as
    /// [`Device::spmv_transposed_sparse_x`] does), reading x\[i\] for each row of A and the row
    /// only where it is not zero; their other formats refuse with
    /// [`Error::Unsupported`] (`what` = [`crate::backend::UNSUPPORTED_TRANSPOSED`]).
    ///
    /// ```
    /// use macko::half::f16;
    /// use macko::{BackendKind, Device, MackoMatrix, Precision};
    ///
    /// let dev = Device::new(BackendKind::Cpu)?;
    /// // A = [[1, 0, 2], [0, 3, 0]]; x = [0, 2] selects row 1 only.
    /// let w = [1.0, 0.0, 2.0, 0.0, 3.0, 0.0].map(f16::from_f32);
    /// let a = dev.upload(&MackoMatrix::from_dense_f16(2, 3, &w)?)?;
    /// let x = dev.upload_vector(&[f16::ZERO, f16::from_f32(2.0)])?;
    /// let mut y = dev.zeros(3, Precision::F32)?; // one element per column
    /// dev.spmv_transposed(&a, &x, &mut y)?;
    /// assert_eq!(dev.download(&y)?.to_f32(), [0.0, 6.0, 0.0]);
    /// # Ok::<(), macko::Error>(())
    /// ```
    pub fn spmv_transposed(
        &self,
        a: &DeviceMatrix,
        x: &DeviceVector,
        y: &mut DeviceVector,
    ) -> Result<()> {
        self.check_sparse_input(a, SparseInputProduct::Transposed(x), y)?;
        self.backend.multiply_transposed(
            &a.storage,
            AnySparseInput::Dense(&x.storage),
            &mut y.storage,
        )
    }

    /// Enqueues y = Aᵀ·x for a sparse x of one element per row of A ([`Device::spmv_transposed`]
    /// with x given by its non-zeros): only the rows of A that x's stored non-zero entries name
    /// are read, so the bytes of A read scale with nnz(x) (`reference::spmv_transposed_sparse_x`).
    /// y has one element per column. wgpu multiplies CSR, homogeneous CSR and MACKO with binary16
    /// values, one workgroup per tile of y's columns, with sums in a fixed order (no float
    /// atomics; a MACKO row has no column index to search, so every workgroup decodes each
    /// selected row up to its tile's end, which makes MACKO slower than CSR here); CUDA those
    /// three too, a team of threads per entry of x scattering its row
    /// with f32 atomics (the order of the adds, and so the last bits of y, may change from run
    /// to run); their other formats refuse with
    /// [`Error::Unsupported`] (`what` = [`crate::backend::UNSUPPORTED_TRANSPOSED`]).
    pub fn spmv_transposed_sparse_x(
        &self,
        a: &DeviceMatrix,
        x: &DeviceSparseVector,
        y: &mut DeviceVector,
    ) -> Result<()> {
        self.check_sparse_input(a, SparseInputProduct::TransposedSparseX(x), y)?;
        self.backend.multiply_transposed(
            &a.storage,
            AnySparseInput::Sparse(&x.storage),
            &mut y.storage,
        )
    }

    /// Times a product with a sparse input ([`Device::time_spmv`] for
    /// [`Device::spmv_sparse_x`], [`Device::spmv_transposed`] and
    /// [`Device::spmv_transposed_sparse_x`]): `warmup` untimed products, then `iters` timed
    /// ones cycling through `a` (copies of one matrix). Returns seconds per product, measured as
    /// [`Device::sparse_input_timer`] says. A backend without the product refuses as the
    /// product does ([`Error::Unsupported`]).
    pub fn time_sparse_input(
        &self,
        a: &[&DeviceMatrix],
        product: SparseInputProduct<'_>,
        y: &mut DeviceVector,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        let Some(first) = self.rotated_copies(a)? else {
            return Ok(Vec::new());
        };
        self.check_sparse_input(first, product, y)?;
        let storages: Vec<_> = a.iter().map(|m| &m.storage).collect();
        let (x, transposed) = product.input();
        self.backend
            .time_sparse_input(&storages, x, transposed, &mut y.storage, warmup, iters)
    }

    /// How [`Device::time_sparse_input`] measures: "cuda events", "wgpu timestamp queries" or
    /// "wall clock".
    pub fn sparse_input_timer(&self) -> &'static str {
        self.backend.sparse_input_timer()
    }

    /// The checks every product with a sparse input makes before its backend sees it: owners,
    /// lengths (x against the rows of a transposed product, the columns otherwise; y the other
    /// way), one vector in y, and a dense x of one f16 vector.
    fn check_sparse_input(
        &self,
        a: &DeviceMatrix,
        product: SparseInputProduct<'_>,
        y: &DeviceVector,
    ) -> Result<()> {
        self.check_owner("matrix", a.device)?;
        self.check_owner("y", y.device)?;
        let (x_device, x_len) = match product {
            SparseInputProduct::SparseX(x) | SparseInputProduct::TransposedSparseX(x) => {
                (x.device, x.len)
            }
            SparseInputProduct::Transposed(x) => (x.device, x.len),
        };
        self.check_owner("x", x_device)?;
        if let SparseInputProduct::Transposed(x) = product {
            same(
                "vectors in x (a transposed product multiplies one vector)",
                1,
                x.batch,
            )?;
        }
        match product {
            SparseInputProduct::SparseX(_) => {
                same("sparse x length (matrix columns)", a.cols, x_len)?;
                same("y length (matrix rows)", a.rows, y.len)?;
            }
            SparseInputProduct::Transposed(_) | SparseInputProduct::TransposedSparseX(_) => {
                same(
                    "x length of a transposed product (matrix rows)",
                    a.rows,
                    x_len,
                )?;
                same(
                    "y length of a transposed product (matrix columns)",
                    a.cols,
                    y.len,
                )?;
            }
        }
        if let SparseInputProduct::Transposed(x) = product {
            if x.precision != Precision::F16 {
                return Err(Error::WrongElementType {
                    what: "x",
                    expected: "f16",
                    found: precision_name(x.precision),
                });
            }
        }
        single_y(y)
    }
}
