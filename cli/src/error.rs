//! Errors of the `macko` command: the library's own, a bad argument, a file that cannot be
//! written, or a check that failed. Each is printed as one line and exits with status 1.

use thiserror::Error;

/// What can make a `macko` command fail.
#[derive(Debug, Error)]
pub enum CliError {
    /// The library refused (no device, bad matrix, device error).
    #[error(transparent)]
    Macko(#[from] macko::Error),
    /// The format crate refused (bad matrix, bad file).
    #[error(transparent)]
    Format(#[from] macko::FormatError),
    /// An argument is out of range.
    #[error("{0}")]
    Usage(String),
    /// A file could not be written.
    #[error("writing {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A result disagreed with the f64 reference.
    #[error("{0}")]
    Check(String),
}

impl CliError {
    /// The message as the one line `main` prints: a backend's multi-line message joined, any
    /// other (which may quote a tensor name or path from a file) with its control characters
    /// escaped, so that no input can add a line or a terminal escape to the output.
    pub fn one_line(&self) -> String {
        let backend = matches!(self, CliError::Macko(_));
        crate::text::one_line(&self.to_string(), !backend)
    }
}
