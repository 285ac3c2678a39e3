//! Writing a converted checkpoint as trusted tools write files: checked before any work (only
//! nothing or a regular file this user may write is replaced), written to a temporary file
//! created exclusively beside the output, streamed there tensor by tensor, flushed to disk,
//! given the mode a plain creation (or the replaced file) has, and renamed into place; removed
//! on every error, on a panic (drop) and, through [`remove_unfinished_outputs`], on an
//! interrupt the program catches.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use macko_format::container::OutTensor;
use safetensors::tensor::{Metadata, TensorInfo};

use super::file::{CheckpointError, Result};

/// The temporary files being written now, so that an interrupt handler can remove them: a
/// process killed by SIGINT or SIGTERM runs no destructor.
mod unfinished {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

    fn paths() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
        // A panic while the list was held leaves it usable: it holds only paths.
        PATHS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn register(path: &Path) {
        paths().push(path.to_path_buf());
    }

    pub(super) fn forget(path: &Path) {
        paths().retain(|p| p != path);
    }

    pub(super) fn remove_all() -> usize {
        let mut list = paths();
        let removed = list
            .iter()
            .filter(|p| std::fs::remove_file(p).is_ok())
            .count();
        list.clear();
        removed
    }
}

/// Removes the temporary files of every conversion still being written, and returns how many
/// it removed. For a program's SIGINT/SIGTERM handler (the `macko` command calls it before
/// exiting on Ctrl-C): the outputs stay as they were, and nothing half-written is left beside
/// them. Conversions still running afterwards fail when they rename.
pub fn remove_unfinished_outputs() -> usize {
    unfinished::remove_all()
}

/// A file in the output's directory that becomes the output on [`TempOutput::persist`] and is
/// removed if dropped before (an error, a panic): the output is never half written.
pub(super) struct TempOutput {
    temp: PathBuf,
    target: PathBuf,
    /// The permissions a plain file creation gives here (0666 less the umask on Unix), read
    /// off the placeholder `create` makes: the writer replaces the placeholder with a private
    /// (0600) file of its own, and the output must not stay private because of that.
    permissions: std::fs::Permissions,
    persisted: bool,
}

impl TempOutput {
    /// The temporary file's path, to write the output into.
    pub(super) fn path(&self) -> &Path {
        &self.temp
    }

    pub(super) fn create(target: &Path) -> Result<Self> {
        let label = target.display().to_string();
        let write_err = |message: String| CheckpointError::Write {
            path: label.clone(),
            message,
        };
        let Some(name) = target.file_name() else {
            return Err(write_err("the output path names no file".into()));
        };
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let existing = check_target(target).map_err(write_err)?;
        let pid = std::process::id();
        let mut last = None;
        for attempt in 0..100u32 {
            let mut temp_name = std::ffi::OsString::from(".");
            temp_name.push(name);
            temp_name.push(format!(".tmp-{pid}-{attempt}"));
            let temp = dir.join(temp_name);
            // The default creation mode (0666 on Unix), which the kernel masks by the umask.
            match OpenOptions::new().write(true).create_new(true).open(&temp) {
                Ok(file) => {
                    // An output replaced keeps its mode; a new one gets a plain creation's.
                    let permissions = match &existing {
                        Some(permissions) => Ok(permissions.clone()),
                        None => file.metadata().map(|m| m.permissions()),
                    };
                    drop(file);
                    return match permissions {
                        Ok(permissions) => {
                            unfinished::register(&temp);
                            Ok(Self {
                                temp,
                                target: target.to_path_buf(),
                                permissions,
                                persisted: false,
                            })
                        }
                        Err(e) => {
                            let _ = std::fs::remove_file(&temp);
                            Err(write_err(format!("reading {}: {e}", temp.display())))
                        }
                    };
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(write_err(format!(
                        "cannot create a temporary file in {}: {e}",
                        dir.display()
                    )))
                }
            }
        }
        Err(write_err(format!(
            "cannot create a temporary file in {}: {}",
            dir.display(),
            last.map_or_else(|| "every name is taken".to_string(), |e| e.to_string())
        )))
    }

    /// Gives the temporary file the permissions a plain creation would, flushes it to disk and
    /// renames it over the target.
    pub(super) fn persist(mut self) -> Result<()> {
        let label = self.target.display().to_string();
        let write_err = |message: String| CheckpointError::Write {
            path: label.clone(),
            message,
        };
        std::fs::set_permissions(&self.temp, self.permissions.clone())
            .map_err(|e| write_err(format!("setting the mode of {}: {e}", self.temp.display())))?;
        File::open(&self.temp)
            .and_then(|f| f.sync_all())
            .map_err(|e| write_err(format!("flushing {}: {e}", self.temp.display())))?;
        std::fs::rename(&self.temp, &self.target)
            .map_err(|e| write_err(format!("renaming {}: {e}", self.temp.display())))?;
        self.persisted = true;
        unfinished::forget(&self.temp);
        Ok(())
    }
}

/// What may stand at the output path: nothing, or a regular file this user may write, whose
/// permissions the output then keeps. The output is a new file renamed over the path, so
/// anything else would be replaced rather than written: a device such as /dev/null or a FIFO
/// would become a regular file (as root, even /dev/null), a symbolic link would become a file
/// instead of writing where it points, and a read-only file of another user in a writable
/// directory would be replaced although it cannot be written. The message names what is there.
fn check_target(target: &Path) -> std::result::Result<Option<std::fs::Permissions>, String> {
    let meta = match std::fs::symlink_metadata(target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot inspect the output path: {e}")),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err(
            "is a symbolic link: convert writes a new file and renames it into place, \
                    which would replace the link, not write where it points; name the file \
                    itself"
                .into(),
        );
    }
    if kind.is_dir() {
        return Err("is a directory".into());
    }
    if !kind.is_file() {
        return Err(
            "is not a regular file (a device, FIFO or socket): convert writes only \
                    regular files, which it renames into place"
                .into(),
        );
    }
    // Opening for writing without truncating changes nothing, and asks the system (ownership,
    // mode, ACLs, a read-only mount) whether this user may write the file.
    match OpenOptions::new().write(true).open(target) {
        Ok(_) => Ok(Some(meta.permissions())),
        Err(e) => Err(format!(
            "exists and this user may not write it ({e}); convert does not replace a file it \
             could not write"
        )),
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = std::fs::remove_file(&self.temp);
            unfinished::forget(&self.temp);
        }
    }
}

/// Streams a safetensors file to `path`: the header as the safetensors crate lays it out
/// (tensors sorted by descending dtype, then name, so every tensor's data is aligned to its
/// dtype; the header padded with spaces to 8 bytes), then each tensor's bytes in that order.
/// The same bytes as `safetensors::serialize`, written into our own temporary file: the crate's
/// `serialize_to_file` makes a second temporary of its own, which an interrupt would leave
/// behind under a name nobody knows.
pub(super) fn write_safetensors(
    path: &Path,
    mut tensors: Vec<(String, OutTensor<'_>)>,
    metadata: std::collections::HashMap<String, String>,
) -> Result<()> {
    let label = path.display().to_string();
    let write_err = |message: String| CheckpointError::Write {
        path: label.clone(),
        message,
    };
    tensors.sort_by(|(ln, lt), (rn, rt)| rt.dtype.cmp(&lt.dtype).then(ln.cmp(rn)));
    let mut offset = 0usize;
    let mut infos = Vec::with_capacity(tensors.len());
    for (name, t) in &tensors {
        let end = offset + t.data.len();
        infos.push((
            name.clone(),
            TensorInfo {
                dtype: t.dtype,
                shape: t.shape.clone(),
                data_offsets: (offset, end),
            },
        ));
        offset = end;
    }
    let header = Metadata::new(Some(metadata), infos)
        .map_err(|e| write_err(format!("the tensor table: {e}")))?;
    let mut header =
        serde_json::to_vec(&header).map_err(|e| write_err(format!("the tensor table: {e}")))?;
    header.resize(header.len().next_multiple_of(8), b' ');
    // A file no reader would open is not written (convert's estimate before the work is a lower
    // bound; this is the exact size).
    if header.len() as u64 > super::limits::MAX_HEADER_BYTES {
        return Err(write_err(format!(
            "the header takes {} bytes, over the limit of {} that readers of safetensors files \
             accept; convert part of the tensors into each of several files",
            header.len(),
            super::limits::MAX_HEADER_BYTES
        )));
    }
    let file = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| write_err(format!("opening {}: {e}", path.display())))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let io = |e: std::io::Error| write_err(format!("writing {}: {e}", path.display()));
    out.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(&header).map_err(io)?;
    for (_, t) in &tensors {
        out.write_all(&t.data).map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::Dtype;
    use std::borrow::Cow;
    use std::collections::HashMap;

    fn tensor(dtype: Dtype, shape: &[usize], bytes: Vec<u8>) -> OutTensor<'static> {
        OutTensor {
            dtype,
            shape: shape.to_vec(),
            data: Cow::Owned(bytes),
        }
    }

    /// The streamed file is byte for byte what the safetensors crate serializes: same order,
    /// same header, same padding.
    #[test]
    fn the_streamed_file_is_what_safetensors_serializes() {
        let tensors = vec![
            (
                "b.codes".to_string(),
                tensor(Dtype::U8, &[3], vec![1, 2, 3]),
            ),
            (
                "a.values".to_string(),
                tensor(Dtype::F16, &[2], vec![0, 60, 0, 188]),
            ),
            (
                "a.row_ptr".to_string(),
                tensor(Dtype::U32, &[2], vec![0, 0, 0, 0, 2, 0, 0, 0]),
            ),
            (
                "z".to_string(),
                tensor(Dtype::F32, &[1, 1], vec![0, 0, 128, 63]),
            ),
        ];
        let metadata = HashMap::from([("k".to_string(), "v".to_string())]);
        let want = safetensors::serialize(tensors.clone(), Some(metadata.clone())).unwrap();
        let path = std::env::temp_dir().join(format!("macko-output-{}.st", std::process::id()));
        std::fs::write(&path, b"old contents, longer than nothing").unwrap();
        write_safetensors(&path, tensors, metadata).unwrap();
        let got = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(got, want);
    }

    /// A temporary file being written is removed by `remove_unfinished_outputs`, and one that
    /// was renamed into place is not touched.
    #[test]
    fn an_interrupt_removes_the_temporaries_being_written() {
        let dir = std::env::temp_dir().join(format!("macko-unfinished-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let done = TempOutput::create(&dir.join("done.safetensors")).unwrap();
        done.persist().unwrap();
        let open = TempOutput::create(&dir.join("open.safetensors")).unwrap();
        let temp = open.path().to_path_buf();
        assert!(temp.exists());
        assert!(remove_unfinished_outputs() >= 1);
        assert!(!temp.exists(), "the temporary was left");
        assert!(dir.join("done.safetensors").exists());
        drop(open);
        std::fs::remove_dir_all(&dir).ok();
    }
}
