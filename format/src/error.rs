//! Typed errors of the format crate. Every variant names the offending value and the rule of
//! docs/FORMAT.md (or of the container) that it breaks, so a caller can tell a user exactly what is
//! wrong with a file without reading the code.

use thiserror::Error;

/// Everything that can go wrong when building, validating, converting or loading a matrix.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum FormatError {
    /// `rows × cols` (or a derived size) does not fit in `usize`/`u32` where it must.
    #[error("shape {rows}×{cols} is too large: {what}")]
    ShapeTooLarge {
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
        /// Which size overflowed.
        what: &'static str,
    },
    /// A dense input has the wrong number of elements.
    #[error("dense data has {found} elements, but {rows}×{cols} needs {expected}")]
    DenseLength {
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
        /// rows × cols.
        expected: usize,
        /// Elements given.
        found: usize,
    },
    /// Rule 1: `row_ptr.len() == rows + 1`.
    #[error("rule 1 (row_ptr length): row_ptr has {found} entries, {rows} rows need {expected}")]
    RowPtrLength {
        /// Rows of the matrix.
        rows: usize,
        /// rows + 1.
        expected: usize,
        /// Entries given.
        found: usize,
    },
    /// Rule 1: `row_ptr[0] == 0`.
    #[error("rule 1 (row_ptr start): row_ptr[0] is {found}, must be 0")]
    RowPtrStart {
        /// The value found in `row_ptr[0]`.
        found: u32,
    },
    /// Rule 1: row_ptr is non-decreasing.
    #[error("rule 1 (row_ptr non-decreasing): row {row} starts at {start} but ends at {end}")]
    RowPtrDecreasing {
        /// The row whose end precedes its start.
        row: usize,
        /// `row_ptr[row]`.
        start: u32,
        /// row_ptr[row + 1].
        end: u32,
    },
    /// The padded length P = ⌈N/8⌉·8 does not fit in u32.
    #[error("rule 2 (size): {entries} entries pad to {padded}, more than u32::MAX")]
    TooManyEntries {
        /// N.
        entries: u64,
        /// P.
        padded: u64,
    },
    /// Rule 2: `values.len() == P`.
    #[error(
        "rule 2 (values length): values has {found} entries, {entries} entries pad to {expected}"
    )]
    ValuesLength {
        /// N = `row_ptr[rows]`.
        entries: usize,
        /// P.
        expected: usize,
        /// Length given.
        found: usize,
    },
    /// Rule 2: `codes.len() == P / 2`.
    #[error("rule 2 (codes length): codes has {found} bytes, {entries} entries need {expected}")]
    CodesLength {
        /// N = `row_ptr[rows]`.
        entries: usize,
        /// P / 2.
        expected: usize,
        /// Length given.
        found: usize,
    },
    /// Rule 3: tail padding values are +0.0.
    #[error("rule 3 (tail padding): value {index} is 0x{bits:04x}, tail padding must be +0.0")]
    TailValueNotZero {
        /// Entry index in N..P.
        index: usize,
        /// The value's bits.
        bits: u16,
    },
    /// Rule 3: tail padding codes are 0.
    #[error("rule 3 (tail padding): code {index} is {code}, tail padding must be 0")]
    TailCodeNotZero {
        /// Entry index in N..P.
        index: usize,
        /// The code found.
        code: u8,
    },
    /// Rule 4: the last entry of every row lies in a column < cols.
    #[error(
        "rule 4 (column range): row {row} reaches column {column}, the matrix has {cols} columns"
    )]
    ColumnOutOfRange {
        /// The row.
        row: usize,
        /// The column its last entry decodes to.
        column: u64,
        /// Columns of the matrix.
        cols: usize,
    },
    /// CSR: columns strictly increase within a row.
    #[error("CSR rule (increasing columns): row {row}, entry {index}: column {column} does not exceed the previous column {previous}")]
    CsrColumnsNotIncreasing {
        /// The row.
        row: usize,
        /// Entry index in the arrays.
        index: usize,
        /// The previous column of the row.
        previous: u32,
        /// The column found.
        column: u32,
    },
    /// CSR: every column is < cols.
    #[error(
        "CSR rule (column range): row {row}, entry {index}: column {column} is not below {cols}"
    )]
    CsrColumnOutOfRange {
        /// The row.
        row: usize,
        /// Entry index in the arrays.
        index: usize,
        /// The column found.
        column: u32,
        /// Columns of the matrix.
        cols: usize,
    },
    /// CSR: `col_idx.len() == values.len() == row_ptr[rows]`.
    #[error("CSR rule (array lengths): row_ptr ends at {entries}, but col_idx has {col_idx} and values {values}")]
    CsrLength {
        /// `row_ptr[rows]`.
        entries: usize,
        /// col_idx.len().
        col_idx: usize,
        /// values.len().
        values: usize,
    },
    /// COO: the same coordinate appears twice.
    #[error("COO: coordinate ({row}, {col}) appears more than once")]
    DuplicateCoordinate {
        /// Row of the duplicate.
        row: u32,
        /// Column of the duplicate.
        col: u32,
    },
    /// COO: a coordinate lies outside the shape.
    #[error("COO: coordinate ({row}, {col}) lies outside the {rows}×{cols} matrix")]
    CoordinateOutOfRange {
        /// Row given.
        row: u32,
        /// Column given.
        col: u32,
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// A vector has the wrong length for a product.
    #[error("vector length {found} does not match the matrix: expected {expected} ({what})")]
    VectorLength {
        /// Which vector.
        what: &'static str,
        /// Required length.
        expected: usize,
        /// Given length.
        found: usize,
    },
    /// A file could not be read or written. Holds the path and the I/O error's kind and text
    /// (not the `std::io::Error` itself, so that this enum stays `Clone` and `PartialEq`).
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What kind of I/O error it was (`NotFound`, `PermissionDenied`, …).
        kind: std::io::ErrorKind,
        /// The operating system's description.
        message: String,
    },
    /// A container holds no tensor (or matrix) of the requested name.
    #[error(
        "{context}: no {what} named `{name}`; the file holds {total} {what}(s){}",
        if available.is_empty() { String::new() } else { format!(", e.g. {}", available.join(", ")) }
    )]
    NotFound {
        /// The file.
        context: String,
        /// `"tensor"` or `"matrix"`.
        what: &'static str,
        /// The name asked for.
        name: String,
        /// A few names that do exist (sorted, at most 8), to spot a typo or a prefix.
        available: Vec<String>,
        /// How many names of that kind the file holds.
        total: usize,
    },
    /// A value that is finite in the source tensor (bf16 or f32) rounds to ±∞ in binary16: the
    /// weights would silently change meaning, so the conversion refuses them.
    #[error(
        "{context}: element ({row}, {col}) is {value}, which does not fit binary16 \
         (largest finite magnitude 65504)"
    )]
    F16Overflow {
        /// File and tensor.
        context: String,
        /// Row of the element.
        row: usize,
        /// Column of the element.
        col: usize,
        /// The value in the source tensor.
        value: f64,
    },
    /// A matrix stored in a container breaks a rule of the format; `source` is the error that
    /// validating its arrays (`from_parts`) returned.
    #[error("{context}: {source}")]
    InContainer {
        /// File and matrix (with its tensors).
        context: String,
        /// The rule that the stored arrays break.
        #[source]
        source: Box<FormatError>,
    },
    /// A range of rows asked of a matrix (a row-aligned copy of some of its rows) is not within
    /// its rows.
    #[error("rows {start}..{end} are not within the matrix's {rows} rows")]
    RowRange {
        /// First row asked for.
        start: usize,
        /// One past the last row asked for.
        end: usize,
        /// Rows of the matrix.
        rows: usize,
    },
    /// A row-aligned copy (rows padded to whole groups, and one group of zeros after them)
    /// would hold more than `u32::MAX` entries, past what 32-bit row offsets address.
    #[error("rows {start}..{end} aligned to groups of 8 would hold more than u32::MAX entries")]
    AlignedTooLarge {
        /// First row of the copy.
        start: usize,
        /// One past its last row.
        end: usize,
    },
    /// Copying gap codes: entries `start..start + count` are not all within the source codes,
    /// or the destination has room for fewer than `count`.
    #[error(
        "gap codes of entries {start}..{start}+{count}: the source holds {source_entries} \
         entries, the destination room for {room}"
    )]
    CodeRange {
        /// First entry copied.
        start: usize,
        /// Entries copied.
        count: usize,
        /// Entries the source codes hold (two per byte).
        source_entries: usize,
        /// Entries the destination holds (two per byte).
        room: usize,
    },
    /// Quantized values: a scale group must hold a multiple of 8 values, from 8 to 2^24.
    #[error(
        "quantized values (scale group): groups of {group} values; a group must hold a \
         multiple of 8 values, from 8 to 16777216"
    )]
    ScaleGroup {
        /// The group size given.
        group: u64,
    },
    /// Quantized values: the packed codes must hold exactly the values' bytes.
    #[error(
        "quantized values (length): {values} {bits} values need {expected} bytes of codes, \
         found {found}"
    )]
    QuantValuesLength {
        /// `int8` or `int4`.
        bits: &'static str,
        /// Values stored (P for MACKO, rows·cols for dense).
        values: usize,
        /// Bytes they need.
        expected: usize,
        /// Bytes given.
        found: usize,
    },
    /// Quantized values: one scale per row, or per group of G values.
    #[error(
        "quantized values (scales length): scales per {layout} need {expected}, found {found}"
    )]
    ScalesLength {
        /// `row`, or `G<size>`.
        layout: String,
        /// Scales needed.
        expected: usize,
        /// Scales given.
        found: usize,
    },
    /// Quantized values: every scale is a finite binary16.
    #[error("quantized values (scales finite): scale {index} has bits {bits:#06x}, not finite")]
    ScaleNotFinite {
        /// Index of the scale.
        index: usize,
        /// Its bits.
        bits: u16,
    },
    /// Quantized values: the codes past the stored values (MACKO's tail padding, the spare
    /// nibble of an odd count of int4 values) are 0.
    #[error("quantized values (tail): code {index} is {q}, must be 0")]
    TailQuantNotZero {
        /// Index of the code.
        index: usize,
        /// The code found.
        q: i8,
    },
    /// Quantizing: a weight is NaN or infinite, which no scale and code can represent.
    #[error("cannot quantize weight {index} (bits {bits:#06x}): it is not finite")]
    NotFiniteWeight {
        /// Index of the weight in storage order.
        index: usize,
        /// Its bits.
        bits: u16,
    },
    /// 2:4: the arrays must have the lengths the shape gives.
    #[error("2:4 (length): {what} needs {expected} elements, found {found}")]
    Sparse24Length {
        /// Which array.
        what: &'static str,
        /// Elements the shape needs.
        expected: usize,
        /// Elements given.
        found: usize,
    },
    /// 2:4: the spare high nibble of an odd count of groups is 0.
    #[error("2:4 (metadata tail): the spare nibble is {found:#x}, must be 0")]
    Sparse24SpareNibble {
        /// The nibble found.
        found: u8,
    },
    /// 2:4: a group's two positions are increasing (first < second).
    #[error(
        "2:4 (positions): row {row}, group {group} stores positions {first} and {second}; the \
         first must be below the second"
    )]
    Sparse24Positions {
        /// Row of the group.
        row: usize,
        /// Group in the row.
        group: usize,
        /// The first position.
        first: usize,
        /// The second position.
        second: usize,
    },
    /// 2:4: a position at or past the row's last column (padding) holds a zero value.
    #[error("2:4 (padding): row {row} stores bits {bits:#06x} at column {col}, past the matrix")]
    Sparse24PaddingNotZero {
        /// Row.
        row: usize,
        /// The column past the end.
        col: usize,
        /// The value's bits.
        bits: u16,
    },
    /// Encoding as given: a group of four columns holds at most two non-zeros.
    #[error(
        "not 2:4: row {row}, columns {first}..{end} hold {nonzeros} non-zeros (at most 2; prune \
         to 2:4 instead)",
        first = group * 4,
        end = group * 4 + 4
    )]
    Not24 {
        /// Row.
        row: usize,
        /// Group in the row (columns 4·group .. 4·group + 4).
        group: usize,
        /// Non-zeros found in it.
        nonzeros: usize,
    },
    /// Sparse vector: one value per index.
    #[error(
        "sparse vector (lengths): {indices} indices but {values} values; each index needs one \
         value"
    )]
    SparseVectorLength {
        /// Indices given.
        indices: usize,
        /// Values given.
        values: usize,
    },
    /// Sparse vector: every index is below the vector's length.
    #[error(
        "sparse vector (index range): index {index} at position {position} is not below the \
         length {len}"
    )]
    SparseIndexOutOfRange {
        /// Where in the index array.
        position: usize,
        /// The index found.
        index: u32,
        /// The vector's length.
        len: usize,
    },
    /// Sparse vector: an index appears twice (indices strictly increase, so each element is
    /// stored at most once).
    #[error(
        "sparse vector (no duplicates): index {index} at position {position} repeats the one \
         before it; indices must strictly increase"
    )]
    SparseIndexDuplicate {
        /// Where in the index array the repeat is.
        position: usize,
        /// The repeated index.
        index: u32,
    },
    /// Sparse vector: indices are sorted, each above the one before it.
    #[error(
        "sparse vector (sorted): index {index} at position {position} is below the previous \
         index {previous}; indices must strictly increase"
    )]
    SparseIndexUnsorted {
        /// Where in the index array.
        position: usize,
        /// The index found.
        index: u32,
        /// The index before it.
        previous: u32,
    },
    /// Sparse vector: a vector of more than 2³² elements, whose indices would not fit u32.
    #[error("sparse vector (size): {len} elements, more than u32 indices address")]
    SparseVectorTooLong {
        /// Elements of the dense vector given.
        len: usize,
    },
    /// A safetensors file could not be read or written, or holds something unexpected.
    #[error("{context}: {message}")]
    Container {
        /// File and tensor the problem is in.
        context: String,
        /// What is wrong.
        message: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;
