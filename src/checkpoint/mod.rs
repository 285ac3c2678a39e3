//! From a checkpoint to products: reading the tensors of any `.safetensors` file, converting its
//! weight matrices to MACKO-16-4, optionally with int8/int4 values ([`convert()`]), measuring
//! what quantization costs ([`relative_error`]), checking a converted file ([`verify()`]), and
//! multiplying every linear weight of a model on every backend ([`products`]). The `macko
//! convert` and `macko verify` commands and the `pruned_checkpoint` example are thin layers over
//! this module.
//!
//! ```
//! use macko::checkpoint::{self, ConvertOptions};
//! use macko::{format::container, DenseMatrix, half::f16};
//!
//! let dir = std::env::temp_dir().join(format!("macko-ckpt-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let (input, output) = (dir.join("in.safetensors"), dir.join("out.safetensors"));
//! let w = DenseMatrix::new(2, 4, [1.0f32, -2.0, 0.5, 3.0, 0.0, 4.0, -1.0, 0.25].map(f16::from_f32).to_vec())?;
//! container::save(&input, &[("layer.weight", (&w).into())])?;
//!
//! let opts = ConvertOptions { prune_to: Some(0.5), ..ConvertOptions::default() };
//! let report = checkpoint::convert(&input, &output, &opts, &mut |_| {})?;
//! assert_eq!(report.converted[0].nonzeros, 4);          // two of four kept in each row
//! let checks = checkpoint::verify(&output, Some(&input))?;
//! assert!(checks.matrices.iter().all(|m| m.problems.is_empty()));
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod accuracy;
mod convert;
mod file;
mod limits;
mod output;
mod pattern;
pub mod products;
mod verify;

pub use accuracy::{error_vectors, relative_error, ERROR_SEED, ERROR_VECTORS};
pub use convert::{
    convert, describe_quantization, ConvertOptions, ConvertReport, CopiedTensor, Progress,
    TensorReport, CONVERT_METADATA_KEY, CONVERT_METADATA_PREFIX,
};
pub use limits::{LimitError, MAX_ROWS_BEYOND_ELEMENTS};
pub use output::remove_unfinished_outputs;
pub use pattern::Pattern;
pub use verify::{verify, MatrixCheck, VerifyReport, REL_ERROR_SLACK};

pub use file::{human_bytes, Checkpoint, CheckpointError, Result, TensorEntry};
