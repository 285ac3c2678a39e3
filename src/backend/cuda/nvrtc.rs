//! Run-time compilation of the CUDA C kernels in `kernels/` with NVRTC.
//!
//! Each kernel file is compiled to a CUBIN (machine code) for the exact architecture of the GPU
//! (`sm_XX`), not to PTX: a CUBIN loads without the driver's JIT, so an NVRTC newer than the
//! driver (the PyPI wheel next to an older driver, say) still works, and nothing is compiled
//! twice. Compiled images are cached for the life of the process, keyed by file and architecture,
//! so every context opened afterwards only loads them.
//!
//! NVRTC needs no GPU and no driver: [`compile`] is what the CI test (`tests/cuda_kernels.rs`)
//! runs on a machine without either, for every kernel and for `sm_80` and `sm_90`, failing on
//! any error or warning.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys};

use super::errors::{cuda_error, internal, unavailable};
use super::kernel_cache;
use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// One kernel file of `kernels/`, embedded in the library.
#[derive(Debug, Clone, Copy)]
pub struct KernelSource {
    /// File name inside `kernels/` (also the program name NVRTC reports errors against).
    pub file: &'static str,
    /// The file's text.
    pub source: &'static str,
    /// What distinguishes this program from others of the same file: its `defines`, named
    /// (empty for a file compiled one way).
    pub variant: &'static str,
    /// `-DNAME=VALUE` options it is always compiled with.
    pub defines: &'static [&'static str],
    /// The kernel headers it includes besides common.cuh (`kernels/macko.cuh`), prepended in
    /// this order after common.cuh.
    pub headers: &'static [Header],
    /// The `extern "C"` entry points it defines.
    pub entries: &'static [&'static str],
}

/// The helpers every kernel file uses (`kernels/common.cuh`), prepended to each before NVRTC
/// compiles it (the files include it themselves only when compiled by nvcc).
pub const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// A kernel header (`kernels/*.cuh` other than common.cuh): file name and text.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// File name inside `kernels/` (the `#include` that nvcc follows and NVRTC's logs name).
    pub file: &'static str,
    /// The header's text.
    pub text: &'static str,
}

/// The MACKO row kernel, generic over the values' layout (binary16, int8, int4).
pub const MACKO_ROW: Header = Header {
    file: "macko.cuh",
    text: include_str!("../../../kernels/macko.cuh"),
};

impl KernelSource {
    /// `file`, with the variant when there is one: how logs and errors name the program.
    pub fn label(&self) -> String {
        if self.variant.is_empty() {
            self.file.to_string()
        } else {
            format!("{} ({})", self.file, self.variant)
        }
    }
}

/// MACKO-16-4 SpMV.
pub const MACKO: KernelSource = KernelSource {
    file: "macko.cu",
    source: include_str!("../../../kernels/macko.cu"),
    variant: "",
    defines: &[],
    headers: &[MACKO_ROW],
    entries: &[
        "macko_spmv_xs_f16",
        "macko_spmv_xs_f32",
        "macko_spmv_xg_f16",
        "macko_spmv_xg_f32",
        "macko_spmv_xu_f16",
        "macko_spmv_xu_f32",
        "macko_spmv_xs_f16_big",
        "macko_spmv_xs_f32_big",
        "macko_spmv_xu_f16_big",
        "macko_spmv_xu_f32_big",
        "macko_combine_f16",
        "macko_combine_f32",
        "macko_flat_xs_f16",
        "macko_flat_xs_f32",
        "macko_flat_xu_f16",
        "macko_flat_xu_f32",
        "macko_combine_rows_f16",
        "macko_combine_rows_f32",
        "macko_lean_f16",
        "macko_lean_f32",
        "macko_spmv_xh_f16",
        "macko_spmv_xh_f32",
        "macko_flat_xh_f16",
        "macko_flat_xh_f32",
        "macko_lean_xh_f16",
        "macko_lean_xh_f32",
    ],
};

/// CSR SpMV.
pub const CSR: KernelSource = KernelSource {
    file: "csr.cu",
    source: include_str!("../../../kernels/csr.cu"),
    variant: "",
    defines: &[],
    headers: &[],
    entries: &[
        "csr_spmv_xs_f16",
        "csr_spmv_xs_f32",
        "csr_spmv_xg_f16",
        "csr_spmv_xg_f32",
    ],
};

/// Dense f16 GEMV.
pub const DENSE: KernelSource = KernelSource {
    file: "dense.cu",
    source: include_str!("../../../kernels/dense.cu"),
    variant: "",
    defines: &[],
    headers: &[],
    entries: &[
        "dense_gemv_a16_f16",
        "dense_gemv_a16_f32",
        "dense_gemv_any_f16",
        "dense_gemv_any_f32",
    ],
};

/// The streaming-read ceiling, and the spin that holds the stream during timing.
pub const STREAM: KernelSource = KernelSource {
    file: "stream.cu",
    source: include_str!("../../../kernels/stream.cu"),
    variant: "",
    defines: &[],
    headers: &[],
    entries: &["stream_read", "spin_wait"],
};

/// Few-token products (Y = A·X for chunks of up to 16 vectors) of every format, and the
/// transpose of X they read.
pub const BATCH: KernelSource = KernelSource {
    file: "batch.cu",
    source: include_str!("../../../kernels/batch.cu"),
    variant: "",
    defines: &[],
    headers: &[],
    entries: &[
        "macko_batch_xs_w2_f16",
        "macko_batch_xs_w2_f32",
        "macko_batch_xs_w4_f16",
        "macko_batch_xs_w4_f32",
        "macko_batch_xs_w8_f16",
        "macko_batch_xs_w8_f32",
        "macko_batch_xs_w16_f16",
        "macko_batch_xs_w16_f32",
        "macko_batch_xg_w2_f16",
        "macko_batch_xg_w2_f32",
        "macko_batch_xg_w4_f16",
        "macko_batch_xg_w4_f32",
        "macko_batch_xg_w8_f16",
        "macko_batch_xg_w8_f32",
        "macko_batch_xg_w16_f16",
        "macko_batch_xg_w16_f32",
        "csr_batch_xs_w2_f16",
        "csr_batch_xs_w2_f32",
        "csr_batch_xs_w4_f16",
        "csr_batch_xs_w4_f32",
        "csr_batch_xs_w8_f16",
        "csr_batch_xs_w8_f32",
        "csr_batch_xs_w16_f16",
        "csr_batch_xs_w16_f32",
        "csr_batch_xg_w2_f16",
        "csr_batch_xg_w2_f32",
        "csr_batch_xg_w4_f16",
        "csr_batch_xg_w4_f32",
        "csr_batch_xg_w8_f16",
        "csr_batch_xg_w8_f32",
        "csr_batch_xg_w16_f16",
        "csr_batch_xg_w16_f32",
        "dense_batch_a16_w2_f16",
        "dense_batch_a16_w2_f32",
        "dense_batch_a16_w4_f16",
        "dense_batch_a16_w4_f32",
        "dense_batch_a16_w8_f16",
        "dense_batch_a16_w8_f32",
        "dense_batch_a16_w16_f16",
        "dense_batch_a16_w16_f32",
        "dense_batch_any_w2_f16",
        "dense_batch_any_w2_f32",
        "dense_batch_any_w4_f16",
        "dense_batch_any_w4_f32",
        "dense_batch_any_w8_f16",
        "dense_batch_any_w8_f32",
        "dense_batch_any_w16_f16",
        "dense_batch_any_w16_f32",
        "batch_transpose",
    ],
};

/// Few-token products on tensor cores (sm_80+): dense and MACKO rows, X read as it is.
pub const BATCH_MMA: KernelSource = KernelSource {
    file: "batch_mma.cu",
    source: include_str!("../../../kernels/batch_mma.cu"),
    variant: "",
    defines: &[],
    headers: &[],
    entries: &[
        "dense_batch_mma_w2_f16",
        "dense_batch_mma_w2_f32",
        "dense_batch_mma_w4_f16",
        "dense_batch_mma_w4_f32",
        "dense_batch_mma_w8_f16",
        "dense_batch_mma_w8_f32",
        "dense_batch_mma_w16_f16",
        "dense_batch_mma_w16_f32",
        "macko_batch_mma_w2_f16",
        "macko_batch_mma_w2_f32",
        "macko_batch_mma_w4_f16",
        "macko_batch_mma_w4_f32",
        "macko_batch_mma_w8_f16",
        "macko_batch_mma_w8_f32",
        "macko_batch_mma_w16_f16",
        "macko_batch_mma_w16_f32",
    ],
};

/// Every kernel file loaded when the backend opens.
pub const KERNELS: [KernelSource; 6] = [MACKO, CSR, DENSE, STREAM, BATCH, BATCH_MMA];

/// Products with a sparse input for CSR and homogeneous CSR (kernels/transposed.cu): y = Aᵀ·x
/// with x sparse or dense (zeroing of the f32 sums, the scatter with f32 atomicAdd, the rounding
/// of an f16 y), y = A·x with x sparse (x scattered into a dense f32 copy, then a CSR product
/// skipping x's zeros), and the ordinary product of a homogeneous CSR matrix. Not in
/// [`KERNELS`]: compiled and loaded on first use (`cuda/sparse_inputs.rs`), so opening the
/// backend pays nothing for it.
pub const TRANSPOSED: KernelSource = KernelSource {
    file: "transposed.cu",
    source: include_str!("../../../kernels/transposed.cu"),
    variant: "",
    defines: &[],
    headers: &[],
    entries: &[
        "transposed_zero",
        "csr_transposed_sparse_x",
        "csr_h_transposed_sparse_x",
        "csr_transposed_dense_x",
        "csr_h_transposed_dense_x",
        "transposed_finish_f16",
        "sparse_x_scatter",
        "csr_sparse_x_f16",
        "csr_sparse_x_f32",
        "csr_h_sparse_x_f16",
        "csr_h_sparse_x_f32",
        "csr_h_spmv_f16",
        "csr_h_spmv_f32",
    ],
};

/// 2:4 structured sparsity, single vector and few-token (kernels/sparse24.cu). Not in
/// [`KERNELS`]: compiled and loaded on the first upload of a 2:4 matrix (`cuda/sparse24.rs`),
/// so opening the backend pays nothing for it.
pub const SPARSE24: KernelSource = KernelSource {
    file: "sparse24.cu",
    source: include_str!("../../../kernels/sparse24.cu"),
    variant: "",
    defines: &[],
    headers: &[],
    entries: &[
        "sparse24_spmv_xv_f16",
        "sparse24_spmv_xv_f32",
        "sparse24_spmv_xh_f16",
        "sparse24_spmv_xh_f32",
        "sparse24_spmv_xs_f16",
        "sparse24_spmv_xs_f32",
        "sparse24_batch_xv_w2_f16",
        "sparse24_batch_xv_w2_f32",
        "sparse24_batch_xv_w4_f16",
        "sparse24_batch_xv_w4_f32",
        "sparse24_batch_xv_w8_f16",
        "sparse24_batch_xv_w8_f32",
        "sparse24_batch_xv_w16_f16",
        "sparse24_batch_xv_w16_f32",
        "sparse24_batch_xh_w2_f16",
        "sparse24_batch_xh_w2_f32",
        "sparse24_batch_xh_w4_f16",
        "sparse24_batch_xh_w4_f32",
        "sparse24_batch_xh_w8_f16",
        "sparse24_batch_xh_w8_f32",
        "sparse24_batch_xh_w16_f16",
        "sparse24_batch_xh_w16_f32",
    ],
};

/// 2:4 products on the sparse tensor cores (sm_80+, `mma.sp`), the matrix in tiles of 16 rows
/// (`cuda/sparse24_tiles.rs`). Compiled and loaded with [`SPARSE24`].
pub const SPARSE24_MMA: KernelSource = KernelSource {
    file: "sparse24_mma.cu",
    source: include_str!("../../../kernels/sparse24_mma.cu"),
    variant: "",
    defines: &[],
    headers: &[],
    entries: &[
        "sparse24_mma_n1_p_f16",
        "sparse24_mma_n1_p_f32",
        "sparse24_mma_n2_p_f16",
        "sparse24_mma_n2_p_f32",
        "sparse24_mma_n1_h_f16",
        "sparse24_mma_n1_h_f32",
        "sparse24_mma_n2_h_f16",
        "sparse24_mma_n2_h_f32",
    ],
};

/// The entries of macko_quant.cu, compiled once per width.
const MACKO_QUANT_ENTRIES: &[&str] = &[
    "macko_q_spmv_xs_f16",
    "macko_q_spmv_xs_f32",
    "macko_q_spmv_xg_f16",
    "macko_q_spmv_xg_f32",
    "macko_q_spmv_xu_f16",
    "macko_q_spmv_xu_f32",
    "macko_q_spmv_xs_f16_big",
    "macko_q_spmv_xs_f32_big",
    "macko_q_spmv_xu_f16_big",
    "macko_q_spmv_xu_f32_big",
    "macko_q_spmv_xh_f16",
    "macko_q_spmv_xh_f32",
    "macko_q_lean_f16",
    "macko_q_lean_f32",
    "macko_q_lean_xh_f16",
    "macko_q_lean_xh_f32",
    "macko_q_combine_f16",
    "macko_q_combine_f32",
];

/// The entries of dense_quant.cu for int8.
const DENSE_QUANT_ENTRIES: &[&str] = &[
    "dense_q_a16_f16",
    "dense_q_a16_f32",
    "dense_q_xs_f16",
    "dense_q_xs_f32",
    "dense_q_any_f16",
    "dense_q_any_f32",
];

/// The entries of dense_quant.cu for int4: those of int8 and the tensor-core ones.
const DENSE_Q4_ENTRIES: &[&str] = &[
    "dense_q_a16_f16",
    "dense_q_a16_f32",
    "dense_q_xs_f16",
    "dense_q_xs_f32",
    "dense_q_any_f16",
    "dense_q_any_f32",
    "dense_q_tc_f16",
    "dense_q_tc_f32",
];

/// MACKO with int8 values (the row kernel's entries; no flat kernel).
pub const MACKO_Q8: KernelSource = KernelSource {
    file: "macko_quant.cu",
    source: include_str!("../../../kernels/macko_quant.cu"),
    variant: "int8",
    defines: &["-DMACKO_QBITS=8"],
    headers: &[MACKO_ROW],
    entries: MACKO_QUANT_ENTRIES,
};

/// MACKO with int4 values.
pub const MACKO_Q4: KernelSource = KernelSource {
    variant: "int4",
    defines: &["-DMACKO_QBITS=4"],
    ..MACKO_Q8
};

/// Dense int8 GEMV.
pub const DENSE_Q8: KernelSource = KernelSource {
    file: "dense_quant.cu",
    source: include_str!("../../../kernels/dense_quant.cu"),
    variant: "int8",
    defines: &["-DMACKO_QBITS=8"],
    headers: &[MACKO_ROW],
    entries: DENSE_QUANT_ENTRIES,
};

/// Dense int4 GEMV, with its tensor-core entries.
pub const DENSE_Q4: KernelSource = KernelSource {
    variant: "int4",
    defines: &["-DMACKO_QBITS=4"],
    entries: DENSE_Q4_ENTRIES,
    ..DENSE_Q8
};

/// The programs compiled on first use, when a quantized matrix of their width is uploaded.
pub const QUANT_KERNELS: [KernelSource; 4] = [MACKO_Q8, MACKO_Q4, DENSE_Q8, DENSE_Q4];

/// The result of one compilation.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The CUBIN image (ELF), ready for `cuModuleLoadData`.
    pub cubin: Vec<u8>,
    /// NVRTC's log: empty when the source compiled without a warning.
    pub log: String,
    /// The options NVRTC was given.
    pub options: Vec<String>,
}

/// Whether the NVRTC library can be loaded, probed once per process (cudarc panics on the first
/// call into a library that is missing, so nothing else here runs before this says yes).
fn nvrtc_present() -> bool {
    static PRESENT: LazyLock<bool> = LazyLock::new(|| {
        // SAFETY: only tries to dlopen the candidate library names and drops what it opened.
        unsafe { nvrtc_sys::is_culib_present() }
    });
    *PRESENT
}

/// Why NVRTC cannot be used, for [`Error::Unavailable`].
pub(crate) const NVRTC_MISSING: &str = "NVRTC (libnvrtc.so.13) was not found, so no kernel can \
    be compiled: install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc` and add its \
    nvidia/cu13/lib folder to LD_LIBRARY_PATH (.ci/nvrtc.sh prints it)";

/// NVRTC's version as `(major, minor)`, or why NVRTC is unavailable.
pub fn version() -> Result<(i32, i32)> {
    if !nvrtc_present() {
        return Err(unavailable(NVRTC_MISSING));
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is present (checked above); both pointers are valid for writes.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| cuda_error("nvrtcVersion", e))?;
    Ok((major, minor))
}

/// The real architectures this NVRTC can compile for, as numbers (`90` for `sm_90`).
pub fn supported_archs() -> Result<Vec<u32>> {
    if !nvrtc_present() {
        return Err(unavailable(NVRTC_MISSING));
    }
    let mut count: c_int = 0;
    // SAFETY: the library is present; `count` is valid for writes.
    unsafe { nvrtc_sys::nvrtcGetNumSupportedArchs(&mut count) }
        .result()
        .map_err(|e| cuda_error("nvrtcGetNumSupportedArchs", e))?;
    let mut archs: Vec<c_int> = vec![0; usize::try_from(count).unwrap_or(0)];
    if !archs.is_empty() {
        // SAFETY: `archs` holds exactly the `count` elements NVRTC writes.
        unsafe { nvrtc_sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
            .result()
            .map_err(|e| cuda_error("nvrtcGetSupportedArchs", e))?;
    }
    Ok(archs
        .into_iter()
        .filter_map(|a| u32::try_from(a).ok())
        .collect())
}

/// The full text NVRTC compiles: the common helpers, then the kernel file, with `#line`
/// directives so that the log names the right file and line.
fn program_text(kernel: &KernelSource) -> String {
    let mut text = format!("#line 1 \"common.cuh\"\n{COMMON}\n");
    for h in kernel.headers {
        text.push_str(&format!("#line 1 \"{}\"\n{}\n", h.file, h.text));
    }
    text.push_str(&format!("#line 1 \"{}\"\n{}", kernel.file, kernel.source));
    text
}

/// The options NVRTC compiles `kernel` for `arch` with, `defines` last.
fn options(kernel: &KernelSource, arch: &str, defines: &[String]) -> Vec<String> {
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        // Source lines in the image, so compute-sanitizer and profilers can name them.
        "--generate-line-info".to_string(),
    ];
    options.extend(kernel.defines.iter().map(|d| d.to_string()));
    options.extend(defines.iter().cloned());
    options
}

/// Compiles one kernel file for `arch` (`"sm_90"`) with `defines` (`-DNAME=VALUE` options).
/// Succeeds with warnings in [`Compiled::log`]; a compile error is an [`Error::Backend`] whose
/// message carries NVRTC's log.
pub fn compile(kernel: &KernelSource, arch: &str, defines: &[String]) -> Result<Compiled> {
    if !nvrtc_present() {
        return Err(unavailable(NVRTC_MISSING));
    }
    let options = options(kernel, arch, defines);
    let text = CString::new(program_text(kernel)).map_err(|e| Error::Backend {
        backend: BackendKind::Cuda,
        message: format!("kernels/{}: source holds a NUL byte: {e}", kernel.label()),
    })?;
    let name = CString::new(kernel.file).map_err(|e| Error::Backend {
        backend: BackendKind::Cuda,
        message: format!("kernel file name {:?}: {e}", kernel.file),
    })?;
    let program = Program::create(&text, &name)?;
    let compiled = program.compile(&options);
    let log = program.log()?;
    if let Err(e) = compiled {
        return Err(Error::Backend {
            backend: BackendKind::Cuda,
            message: format!(
                "NVRTC could not compile kernels/{} for {arch} ({e:?}, options {}):\n{log}",
                kernel.label(),
                options.join(" ")
            ),
        });
    }
    let cubin = program.cubin()?;
    Ok(Compiled {
        cubin,
        log,
        options,
    })
}

/// An NVRTC program, destroyed when dropped.
struct Program(nvrtc_sys::nvrtcProgram);

impl Program {
    fn create(text: &CString, name: &CString) -> Result<Self> {
        let program = nvrtc_result::create_program(text, Some(name))
            .map_err(|e| cuda_error("nvrtcCreateProgram", e))?;
        Ok(Self(program))
    }

    fn compile(&self, options: &[String]) -> std::result::Result<(), nvrtc_result::NvrtcError> {
        let c_options: Vec<CString> = options
            .iter()
            .filter_map(|o| CString::new(o.as_str()).ok())
            .collect();
        let pointers: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();
        let count = c_int::try_from(pointers.len()).unwrap_or(c_int::MAX);
        // SAFETY: the program is live (created in `create`, destroyed only in Drop); `pointers`
        // holds `count` NUL-terminated strings that outlive the call.
        unsafe { nvrtc_sys::nvrtcCompileProgram(self.0, count, pointers.as_ptr()) }.result()
    }

    /// The program log, NUL terminator and surrounding whitespace removed.
    fn log(&self) -> Result<String> {
        // SAFETY: the program is live.
        let raw = unsafe { nvrtc_result::get_program_log(self.0) }
            .map_err(|e| cuda_error("nvrtcGetProgramLog", e))?;
        let bytes: Vec<u8> = raw
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Ok(String::from_utf8_lossy(&bytes).trim().to_string())
    }

    fn cubin(&self) -> Result<Vec<u8>> {
        let mut size: usize = 0;
        // SAFETY: the program is live and compiled; `size` is valid for writes.
        unsafe { nvrtc_sys::nvrtcGetCUBINSize(self.0, &mut size) }
            .result()
            .map_err(|e| cuda_error("nvrtcGetCUBINSize", e))?;
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` has the `size` bytes NVRTC writes.
        unsafe { nvrtc_sys::nvrtcGetCUBIN(self.0, cubin.as_mut_ptr().cast::<c_char>()) }
            .result()
            .map_err(|e| cuda_error("nvrtcGetCUBIN", e))?;
        if cubin.is_empty() {
            return Err(Error::Backend {
                backend: BackendKind::Cuda,
                message: "NVRTC returned an empty CUBIN (was a virtual compute_XX \
                          architecture given instead of sm_XX?)"
                    .into(),
            });
        }
        Ok(cubin)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once, here.
        // A failure to destroy only leaks host memory, so it is ignored.
        let _ = unsafe { nvrtc_result::destroy_program(self.0) };
    }
}

/// Key of the process-wide cache: file, variant, architecture.
type CacheKey = (&'static str, &'static str, String);

static CACHE: LazyLock<Mutex<HashMap<CacheKey, Arc<Vec<u8>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The CUBIN of `kernel` for `arch`, compiled at most once per process, and loaded from the
/// on-disk cache of earlier processes where it holds it (`MACKO_KERNEL_CACHE`;
/// `kernel_cache.rs`). Two threads asking at once may both compile; one result is kept.
pub(crate) fn cubin_cached(kernel: &KernelSource, arch: &str) -> Result<Arc<Vec<u8>>> {
    let key: CacheKey = (kernel.file, kernel.variant, arch.to_string());
    let poisoned = |_| internal("the NVRTC cache lock is poisoned");
    if let Some(cubin) = CACHE.lock().map_err(poisoned)?.get(&key) {
        return Ok(cubin.clone());
    }
    let dir = lock_kernel_cache()?.clone();
    let cubin = Arc::new(cubin_on_disk(kernel, arch, dir.as_deref())?);
    Ok(CACHE
        .lock()
        .map_err(poisoned)?
        .entry(key)
        .or_insert(cubin)
        .clone())
}

/// The folder of compiled kernels [`cubin_cached`] reads and fills: the one the last CUDA
/// device opened was given (`MACKO_KERNEL_CACHE`, resolved by the device layer; the same for
/// every device of a process unless a program changes the variable between two opens).
static KERNEL_CACHE: Mutex<Option<PathBuf>> = Mutex::new(None);

fn lock_kernel_cache() -> Result<std::sync::MutexGuard<'static, Option<PathBuf>>> {
    KERNEL_CACHE
        .lock()
        .map_err(|_| internal("the kernel cache folder's lock is poisoned"))
}

/// Sets the folder [`cubin_cached`] keeps compiled kernels in (`None`: none).
pub(crate) fn use_kernel_cache(dir: Option<PathBuf>) {
    if let Ok(mut current) = lock_kernel_cache() {
        *current = dir;
    }
}

/// The CUBIN of `kernel` for `arch` from the cache folder `dir` where it holds this exact
/// program's, else compiled (and left there for the next process). A file that is not this
/// program's is ignored with a warning; one that cannot be written costs only the next
/// process a compilation (warned once).
fn cubin_on_disk(kernel: &KernelSource, arch: &str, dir: Option<&Path>) -> Result<Vec<u8>> {
    let Some(dir) = dir else {
        return Ok(compile(kernel, arch, &[])?.cubin);
    };
    let key = kernel_cache::Key::new(
        kernel.file,
        kernel.variant,
        arch,
        version()?,
        &options(kernel, arch, &[]),
        &program_text(kernel),
    );
    match kernel_cache::load(dir, &key) {
        Ok(cubin) => return Ok(cubin),
        Err(kernel_cache::Miss::Absent) => {}
        Err(kernel_cache::Miss::Rejected(why)) => warn_once(&format!(
            "ignoring a cached kernel ({why}); compiling it again"
        )),
    }
    let cubin = compile(kernel, arch, &[])?.cubin;
    if let Err(e) = kernel_cache::store(dir, &key, &cubin) {
        warn_once(&format!(
            "cannot keep compiled kernels in {} ({e}); set MACKO_KERNEL_CACHE to another \
             folder, or to off",
            dir.display()
        ));
    }
    Ok(cubin)
}

/// Prints `message` on stderr as a warning unless this process printed it already.
fn warn_once(message: &str) {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let first = SEEN.lock().map_or(true, |mut seen| {
        if seen.iter().any(|m| m == message) {
            false
        } else {
            seen.push(message.to_string());
            true
        }
    });
    if first {
        eprintln!("warning: macko: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_file_declares_its_entries() {
        for k in KERNELS
            .iter()
            .chain(&QUANT_KERNELS)
            .chain([&SPARSE24, &SPARSE24_MMA, &TRANSPOSED])
        {
            for e in k.entries {
                assert!(
                    k.source.contains(&format!("({e},")) || k.source.contains(&format!(" {e}(")),
                    "{} does not define {e}",
                    k.file
                );
            }
            let guarded = |name: &str, guard: &str| {
                k.source
                    .contains(&format!("#ifndef {guard}\n#include \"{name}\""))
            };
            // nvcc compiles each file alone, so it includes what NVRTC prepends, guarded.
            assert!(
                guarded("common.cuh", "MACKO_COMMON_CUH") || guarded("macko.cuh", "MACKO_ROW_CUH"),
                "{} must guard its include of common.cuh or macko.cuh",
                k.file
            );
            for h in k.headers {
                assert!(
                    k.source.contains(&format!("#include \"{}\"", h.file)),
                    "{} is compiled with {} but does not include it",
                    k.file,
                    h.file
                );
            }
        }
    }

    /// Through the cache folder: the first call compiles and leaves the file, the second loads
    /// it (the same image, no compilation), a damaged file is compiled over. Needs NVRTC
    /// (skipped without it; `tests/cuda_kernels.rs` is the test that insists on NVRTC).
    #[test]
    fn compiled_kernels_are_kept_on_disk_and_damaged_ones_replaced() {
        if !nvrtc_present() {
            println!("skipping: {NVRTC_MISSING}");
            return;
        }
        let dir = std::env::temp_dir().join(format!("macko-nvrtc-disk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let compiled = compile(&STREAM, "sm_90", &[]).unwrap().cubin;
        let first = cubin_on_disk(&STREAM, "sm_90", Some(&dir)).unwrap();
        assert_eq!(first, compiled, "NVRTC is deterministic for one program");
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(files.len(), 1, "one file, no temporary left behind");
        let path = files[0].path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        assert!(
            name.starts_with("stream_cu-sm_90-") && name.ends_with(".cubin"),
            "{name}"
        );
        // A file that is a valid cache entry of another image: loaded as stored, which shows
        // the second call reads the file rather than compiling.
        let key = kernel_cache::Key::new(
            STREAM.file,
            STREAM.variant,
            "sm_90",
            version().unwrap(),
            &options(&STREAM, "sm_90", &[]),
            &program_text(&STREAM),
        );
        kernel_cache::store(&dir, &key, b"stored image").unwrap();
        assert_eq!(
            cubin_on_disk(&STREAM, "sm_90", Some(&dir)).unwrap(),
            b"stored image".to_vec()
        );
        // Damaged: compiled again and written over.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            cubin_on_disk(&STREAM, "sm_90", Some(&dir)).unwrap(),
            compiled
        );
        assert_eq!(kernel_cache::load(&dir, &key), Ok(compiled));
        // Another architecture: its own file.
        cubin_on_disk(&STREAM, "sm_80", Some(&dir)).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn program_text_restarts_line_numbers_at_the_kernel_file() {
        let text = program_text(&MACKO);
        assert!(text.starts_with("#line 1 \"common.cuh\"\n"));
        assert!(text.contains("\n#line 1 \"macko.cuh\"\n"));
        assert!(text.contains("\n#line 1 \"macko.cu\"\n"));
    }
}
