//! A safetensors header with a key twice (two tensors of one name, or a metadata entry given
//! twice) is refused: JSON parsers, this crate's included, keep the last value silently, so two
//! readers of the same file could see different tensors. Checked on the raw header, before it is
//! parsed into the tensor table, at the top level and inside `__metadata__` (the fields of each
//! tensor's entry are a fixed set whose repetition the table's parser already refuses).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

/// The safetensors key of the metadata map.
const METADATA: &str = "__metadata__";

/// Parses a header only to check that no key repeats.
pub(super) struct UniqueKeys;

/// Which map is being read, for the visitor and its message.
#[derive(Clone, Copy)]
enum Level {
    Top,
    Metadata,
}

struct KeysVisitor(Level);

impl<'de> Visitor<'de> for KeysVisitor {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(match self.0 {
                    Level::Top => format!(
                        "the key `{key}` appears twice; a reader would keep one of the two \
                         silently"
                    ),
                    Level::Metadata => format!(
                        "the metadata key `{key}` appears twice; a reader would keep one of \
                         the two silently"
                    ),
                }));
            }
            match self.0 {
                Level::Top if key == METADATA => {
                    map.next_value::<MetadataKeys>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The `__metadata__` map, checked the same way.
struct MetadataKeys;

impl<'de> Deserialize<'de> for MetadataKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(KeysVisitor(Level::Metadata))?;
        Ok(MetadataKeys)
    }
}

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(KeysVisitor(Level::Top))?;
        Ok(UniqueKeys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(json: &str) -> Result<(), String> {
        serde_json::from_str::<UniqueKeys>(json)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn repeated_keys_are_named_at_either_level() {
        let t = r#"{"dtype":"F16","shape":[1],"data_offsets":[0,2]}"#;
        assert!(check(&format!(r#"{{"a":{t},"b":{t}}}"#)).is_ok());
        let err = check(&format!(r#"{{"a":{t},"a":{t}}}"#)).unwrap_err();
        assert!(err.contains("`a` appears twice"), "{err}");
        let err = check(r#"{"__metadata__":{"k":"1","k":"2"}}"#).unwrap_err();
        assert!(err.contains("metadata key `k` appears twice"), "{err}");
        // The same key in two different maps is no repetition.
        assert!(check(r#"{"__metadata__":{"a":"1"},"a":{}}"#).is_ok());
    }
}
