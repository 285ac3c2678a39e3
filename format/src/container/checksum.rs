//! Per-tensor checksums recorded in a file's metadata, so that a file that was not completely
//! written (a crash or `kill -9` during writing leaves a full-size file whose unwritten tensors
//! read as zeros, and zeros form valid matrices) or was changed afterwards is detected on load
//! rather than multiplied.
//!
//! The record is the metadata entry [`CHECKSUMS_KEY`], a JSON object
//! `{"algorithm":"crc32","tensors":{"w.values":"1c291ca3",...}}`: CRC-32 (ISO-HDLC, the
//! checksum of zip and PNG) of each tensor's data bytes, as eight lowercase hex digits. Files
//! written by [`super::save`] and by `macko convert` carry it; a file without it (from another
//! tool) loads as before. Loading checks every tensor the record lists: a listed tensor that is
//! missing or whose bytes hash differently is an error naming it.

use std::collections::{BTreeMap, HashMap};

use crate::error::{FormatError, Result};

/// Metadata key of the checksum record.
pub const CHECKSUMS_KEY: &str = "macko-checksums";

/// The one algorithm written and read.
const ALGORITHM: &str = "crc32";

/// CRC-32 of `bytes` as the record writes it.
fn crc32_hex(bytes: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(bytes))
}

/// The record's JSON for these tensors (name, data bytes).
pub fn record<'a>(tensors: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let sums: BTreeMap<&str, String> = tensors
        .into_iter()
        .map(|(name, data)| (name, crc32_hex(data)))
        .collect();
    serde_json::json!({ "algorithm": ALGORITHM, "tensors": sums }).to_string()
}

/// Checks the record in `metadata`, if there is one, against the tensors' bytes (`data` looks a
/// tensor up by name). Returns how many tensors were checked (0 without a record).
pub(crate) fn check<'a>(
    label: &str,
    metadata: Option<&HashMap<String, String>>,
    data: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<usize> {
    let Some(text) = metadata.and_then(|m| m.get(CHECKSUMS_KEY)) else {
        return Ok(0);
    };
    let bad = |message: String| FormatError::Container {
        context: format!("{label}, metadata `{CHECKSUMS_KEY}`"),
        message,
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not a JSON object: {e}")))?;
    let algorithm = value.get("algorithm").and_then(|a| a.as_str());
    if algorithm != Some(ALGORITHM) {
        return Err(bad(format!(
            "algorithm {algorithm:?}: this version reads only {ALGORITHM:?}"
        )));
    }
    let Some(tensors) = value.get("tensors").and_then(|t| t.as_object()) else {
        return Err(bad("no `tensors` object".into()));
    };
    for (name, recorded) in tensors {
        let Some(recorded) = recorded.as_str() else {
            return Err(bad(format!(
                "tensor `{name}`: the checksum is not a string"
            )));
        };
        let Some(bytes) = data(name) else {
            return Err(bad(format!(
                "tensor `{name}` has a checksum but is not in the file: the file was changed \
                 after it was written"
            )));
        };
        let found = crc32_hex(bytes);
        if found != recorded {
            return Err(FormatError::Container {
                context: format!("{label}, tensor `{name}`"),
                message: format!(
                    "CRC-32 {found} where {recorded} was recorded when the file was written: \
                     the file was not completely written (a crash or a kill during writing), \
                     or was changed since"
                ),
            });
        }
    }
    Ok(tensors.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(record: String) -> HashMap<String, String> {
        HashMap::from([(CHECKSUMS_KEY.to_string(), record)])
    }

    #[test]
    fn a_record_checks_the_bytes_it_was_made_from() {
        let (a, b) = (b"abc".as_slice(), [0u8; 16].as_slice());
        let m = metadata(record([("a", a), ("b", b)]));
        let lookup = |n: &str| match n {
            "a" => Some(a),
            "b" => Some(b),
            _ => None,
        };
        assert_eq!(check("f", Some(&m), lookup).ok(), Some(2));
        // The CRC-32 check value of "123456789" is cbf43926 (ISO-HDLC).
        assert_eq!(crc32_hex(b"123456789"), "cbf43926");
    }

    #[test]
    fn changed_or_missing_tensors_are_named() {
        let m = metadata(record([("w.values", b"\x01\x02".as_slice())]));
        let zeros = |_: &str| Some(b"\x00\x00".as_slice());
        let err = check("f", Some(&m), zeros).unwrap_err().to_string();
        assert!(
            err.contains("w.values") && err.contains("not completely written"),
            "{err}"
        );
        let err = check("f", Some(&m), |_| None).unwrap_err().to_string();
        assert!(err.contains("not in the file"), "{err}");
    }

    #[test]
    fn a_malformed_record_is_an_error_and_no_record_is_none() {
        for bad in [
            "[",
            r#"{"algorithm":"md5","tensors":{}}"#,
            r#"{"algorithm":"crc32"}"#,
        ] {
            let m = metadata(bad.to_string());
            assert!(check("f", Some(&m), |_| None).is_err(), "{bad}");
        }
        assert_eq!(check("f", None, |_| None).ok(), Some(0));
    }
}
