//! Compiled kernels kept on disk between processes (`MACKO_KERNEL_CACHE`, src/options.rs).
//!
//! NVRTC takes seconds per kernel file on a workstation's cores (`macko_quant.cu` about 45 s on
//! two), and every process used to pay that again at its first product: a Python session, each
//! test binary, each run of the CLI. The first process to compile a program for an
//! architecture now leaves the CUBIN in the user's cache directory, and the next ones load it.
//!
//! A file is trusted only for exactly the program it was made from. Its identity (the key) is a
//! text naming the library's version, the kernel file and variant, the architecture, NVRTC's
//! version, every compile option, and the length and FNV-1a hash of the full program text (the
//! kernel file with its headers); the file stores that text, the CUBIN and a hash of the CUBIN,
//! and a load compares all three. Anything else (a truncated or corrupted file, another
//! program's file under a colliding name) is ignored with a warning on stderr and compiled
//! again, so a bad file costs a compilation, never a wrong or crashing kernel. Files are written
//! to a temporary name and renamed into place, so a reader never sees half a file.
//!
//! Not covered by the key: NVRTC's patch version (`nvrtcVersion` gives major.minor), so after
//! a patch update of CUDA the kernels of the older NVRTC stay in use until the folder is
//! cleared. Nothing is evicted: a new library version or source leaves the old files (a few
//! hundred KB each) until the folder is cleared.

use std::io::Write;
use std::path::{Path, PathBuf};

/// First bytes of every cache file (the format's version is in them).
const MAGIC: &[u8] = b"MACKO-CUBIN-1\n";

/// FNV-1a, 64 bits: a stable hash (unlike std's, which may change between Rust releases) for
/// file names and integrity checks. Not a defence against tampering: the cache directory is the
/// user's own.
pub(crate) fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The identity of one compiled program (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    /// Names the file: kernel file, variant and architecture, readable in a listing.
    stem: String,
    /// Everything the CUBIN depends on, stored in the file and compared on load.
    text: String,
}

impl Key {
    /// The key of `file` (`variant`) compiled for `arch` by NVRTC `nvrtc` with `options`, from
    /// the full program text `program`.
    pub fn new(
        file: &str,
        variant: &str,
        arch: &str,
        nvrtc: (i32, i32),
        options: &[String],
        program: &str,
    ) -> Self {
        let text = format!(
            "macko {}\nfile {file}\nvariant {variant}\narch {arch}\nnvrtc {}.{}\noptions {}\n\
             program {} bytes, fnv64 {:016x}\n",
            env!("CARGO_PKG_VERSION"),
            nvrtc.0,
            nvrtc.1,
            options.join(" "),
            program.len(),
            fnv64(program.as_bytes()),
        );
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect()
        };
        let stem = if variant.is_empty() {
            format!("{}-{arch}", clean(file))
        } else {
            format!("{}-{}-{arch}", clean(file), clean(variant))
        };
        Self { stem, text }
    }

    /// The file of this key in `dir`.
    pub fn path(&self, dir: &Path) -> PathBuf {
        dir.join(format!(
            "{}-{:016x}.cubin",
            self.stem,
            fnv64(self.text.as_bytes())
        ))
    }
}

/// Why a cache file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Miss {
    /// No file (the normal first run): compile quietly.
    Absent,
    /// A file that is not this program's, or not whole: compile, and say so.
    Rejected(String),
}

/// The CUBIN of `key` from `dir`, or why there is none usable.
pub(crate) fn load(dir: &Path, key: &Key) -> Result<Vec<u8>, Miss> {
    let path = key.path(dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Miss::Absent),
        Err(e) => return Err(Miss::Rejected(format!("{}: {e}", path.display()))),
    };
    parse(&bytes, key).map_err(|why| Miss::Rejected(format!("{}: {why}", path.display())))
}

/// The CUBIN in a cache file's `bytes`, if the file is whole and `key`'s.
fn parse(bytes: &[u8], key: &Key) -> Result<Vec<u8>, &'static str> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a macko kernel cache file")?;
    let rest = rest
        .strip_prefix(key.text.as_bytes())
        .ok_or("made for another program (library, source, options or NVRTC)")?;
    let rest = rest.strip_prefix(b"\0").ok_or("made for another program")?;
    let (len, rest) = take_u64(rest).ok_or("truncated")?;
    let len = usize::try_from(len).map_err(|_| "corrupt length")?;
    if rest.len() != len.saturating_add(8) {
        return Err("truncated or padded");
    }
    let (cubin, tail) = rest.split_at(len);
    let (hash, _) = take_u64(tail).ok_or("truncated")?;
    if hash != fnv64(cubin) {
        return Err("its kernel image does not match its checksum");
    }
    Ok(cubin.to_vec())
}

fn take_u64(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*head), rest))
}

/// Writes `cubin` as `key`'s file in `dir` (created if needed): to a temporary file of its own
/// first (created new, so two writers, threads of one process or processes of two containers
/// sharing the folder, never share one), then renamed, so that a concurrent reader sees the old
/// file, none, or the whole new one.
pub(crate) fn store(dir: &Path, key: &Key, cubin: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = key.path(dir);
    let (tmp, mut f) = temporary(&path)?;
    let written = (|| {
        f.write_all(MAGIC)?;
        f.write_all(key.text.as_bytes())?;
        f.write_all(b"\0")?;
        f.write_all(&(cubin.len() as u64).to_le_bytes())?;
        f.write_all(cubin)?;
        f.write_all(&fnv64(cubin).to_le_bytes())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A new temporary file beside `path`, named by the process, a counter and the time, created
/// only if no such file exists (never truncating or following another writer's).
fn temporary(path: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for _ in 0..8 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp.{}.{n}.{nanos}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name was free")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(program: &str) -> Key {
        Key::new(
            "macko.cu",
            "",
            "sm_90",
            (13, 0),
            &["--gpu-architecture=sm_90".to_string()],
            program,
        )
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("macko-kernel-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn fnv64_is_the_published_function() {
        // Test vectors of FNV-1a 64 (the empty string and "a").
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_stored_kernel_loads_back_and_only_for_its_program() {
        let dir = scratch("roundtrip");
        let k = key("__global__ void f() {}");
        assert_eq!(load(&dir, &k), Err(Miss::Absent));
        let cubin: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        store(&dir, &k, &cubin).unwrap();
        assert_eq!(load(&dir, &k), Ok(cubin.clone()));
        // Another program, architecture or NVRTC: another file, absent.
        assert_eq!(
            load(&dir, &key("__global__ void g() {}")),
            Err(Miss::Absent)
        );
        let other_arch = Key::new("macko.cu", "", "sm_80", (13, 0), &[], "x");
        assert_eq!(load(&dir, &other_arch), Err(Miss::Absent));
        // Overwritten in place by a second store: still whole.
        store(&dir, &k, &cubin[..100]).unwrap();
        assert_eq!(load(&dir, &k), Ok(cubin[..100].to_vec()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn damaged_or_foreign_files_are_rejected_never_loaded() {
        let dir = scratch("damaged");
        let k = key("program");
        let cubin = vec![7u8; 1000];
        store(&dir, &k, &cubin).unwrap();
        let path = k.path(&dir);
        let good = std::fs::read(&path).unwrap();
        let rejected = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            matches!(load(&dir, &k), Err(Miss::Rejected(_)))
        };
        // Every byte flipped in turn: the magic, the key, the length, the image or its hash.
        for i in (0..good.len()).step_by(37).chain([good.len() - 1]) {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(rejected(&bad), "a flip at byte {i} was not caught");
        }
        // Truncated anywhere, or with bytes after the end.
        for cut in [0, 5, MAGIC.len() + 10, good.len() - 9, good.len() - 1] {
            assert!(rejected(&good[..cut]), "cut at {cut} was not caught");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(rejected(&longer));
        // Another program's file under this key's name (a colliding name).
        let other = key("another program");
        store(&dir, &other, &cubin).unwrap();
        std::fs::copy(other.path(&dir), &path).unwrap();
        assert!(matches!(load(&dir, &k), Err(Miss::Rejected(_))));
        std::fs::write(&path, &good).unwrap();
        assert_eq!(load(&dir, &k), Ok(cubin));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_an_error_not_a_panic() {
        let dir = scratch("blocked");
        // A file where the directory should be.
        std::fs::write(&dir, b"not a directory").unwrap();
        assert!(store(&dir, &key("p"), &[1, 2, 3]).is_err());
        assert!(matches!(load(&dir, &key("p")), Err(Miss::Rejected(_))));
        let _ = std::fs::remove_file(&dir);
    }
}
