//! Reading arguments and option objects, with `TypeError`s that name the function, the option
//! and what was passed instead. Integers are JS numbers that are safe integers, or BigInts that
//! fit in 64 bits; napi-rs would silently truncate `2.5` to `2`.

use std::ffi::CStr;

use dlbridge_napi::node_api::{Handle, JsType, Scope};
use dlbridge_napi::{Error, Result};
use napi::bindgen_prelude::JsValue;

/// The largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A short description of a value for messages: its type, and its value for scalars.
pub(crate) fn describe(value: Handle<'_>) -> String {
    dlbridge_napi::describe(value)
}

/// The `TypeError` for an argument of the wrong kind: "`what` must be `expected`, got …".
pub(crate) fn invalid_argument(what: &str, expected: &str, value: Handle<'_>) -> Error {
    Error::type_error(
        "ERR_DLBRIDGE_INVALID_ARGUMENT",
        format!("{what} must be {expected}, got {}", describe(value)),
    )
}

/// An integer argument (`what` names it in messages).
pub(crate) fn integer(value: Handle<'_>, what: &str) -> Result<i64> {
    let not_integer = || invalid_argument(what, "an integer", value);
    match value.js_type() {
        JsType::Number => {
            let v = value.number_value().ok_or_else(not_integer)?;
            if v.fract() == 0.0 && v.abs() <= MAX_SAFE_INTEGER {
                Ok(v as i64)
            } else {
                Err(not_integer())
            }
        }
        JsType::BigInt => match value.bigint_i64() {
            Some((v, true)) => Ok(v),
            _ => Err(not_integer()),
        },
        _ => Err(not_integer()),
    }
}

/// A list of integers (shape, strides), or a single integer as a one-element list when
/// `allow_scalar` (so that `empty(5)` means `empty([5])`).
pub(crate) fn integer_list(value: Handle<'_>, what: &str, allow_scalar: bool) -> Result<Vec<i64>> {
    if allow_scalar && matches!(value.js_type(), JsType::Number | JsType::BigInt) {
        return Ok(vec![integer(value, what)?]);
    }
    let elements = value
        .array_elements()?
        .ok_or_else(|| invalid_argument(what, "an array of integers", value))?;
    elements
        .into_iter()
        .enumerate()
        .map(|(i, element)| integer(element, &format!("{what}[{i}]")))
        .collect()
}

/// A dtype name argument: `None` when undefined.
pub(crate) fn dtype_name(value: Option<Handle<'_>>, what: &str) -> Result<Option<String>> {
    let Some(value) = value.filter(|v| !v.is_nullish()) else {
        return Ok(None);
    };
    value
        .string_value()
        .map(Some)
        .ok_or_else(|| invalid_argument(what, "a dtype name string", value))
}

/// An options object (`undefined`/`null`: no options).
pub(crate) struct Options<'env> {
    object: Option<Handle<'env>>,
    function: &'static str,
    known: &'static [&'static str],
}

impl<'env> Options<'env> {
    /// Reads the options argument of `function`, whose options are `known`: any other own key
    /// (a misspelt `readOnly`, `stride`, `offest`) is a `TypeError` naming it and, when one is
    /// close, the option meant. Objects without keys cost one Node-API call.
    pub(crate) fn new(
        value: Option<Handle<'env>>,
        function: &'static str,
        known: &'static [&'static str],
    ) -> Result<Self> {
        let object = value.filter(|v| !v.is_nullish());
        if let Some(object) = object {
            if object.js_type() != JsType::Object {
                let what = format!("{function}: options");
                return Err(invalid_argument(&what, "an object", object));
            }
            for key in object.own_keys()? {
                let key = key.string_value().unwrap_or_default();
                if !known.contains(&key.as_str()) {
                    return Err(unknown_option(function, &key, known));
                }
            }
        }
        Ok(Options {
            object,
            function,
            known,
        })
    }

    /// [`Options::new`] of an optional argument napi-rs handed us.
    pub(crate) fn argument<V: JsValue<'env>>(
        scope: Scope<'env>,
        value: Option<&V>,
        function: &'static str,
        known: &'static [&'static str],
    ) -> Result<Self> {
        Options::new(value.map(|v| scope.adopt(v)), function, known)
    }

    /// The option's value, `None` when absent or undefined.
    fn get(&self, name: &CStr) -> Result<Option<Handle<'env>>> {
        debug_assert!(
            self.known.iter().any(|k| k.as_bytes() == name.to_bytes()),
            "{}: option {name:?} read but not declared",
            self.function
        );
        match self.object {
            None => Ok(None),
            Some(object) => Ok(Some(object.get_named(name)?).filter(|v| !v.is_nullish())),
        }
    }

    fn label(&self, name: &CStr) -> String {
        format!("{}: {}", self.function, name.to_string_lossy())
    }

    /// A boolean option.
    pub(crate) fn bool(&self, name: &CStr) -> Result<Option<bool>> {
        let Some(value) = self.get(name)? else {
            return Ok(None);
        };
        value
            .bool_value()
            .map(Some)
            .ok_or_else(|| invalid_argument(&self.label(name), "a boolean", value))
    }

    /// An integer option.
    pub(crate) fn integer(&self, name: &CStr) -> Result<Option<i64>> {
        self.get(name)?
            .map(|v| integer(v, &self.label(name)))
            .transpose()
    }

    /// A list-of-integers option (shape, strides).
    pub(crate) fn integer_list(&self, name: &CStr) -> Result<Option<Vec<i64>>> {
        self.get(name)?
            .map(|v| integer_list(v, &self.label(name), false))
            .transpose()
    }

    /// A dtype-name option.
    pub(crate) fn dtype(&self, name: &CStr) -> Result<Option<String>> {
        self.get(name)?
            .and_then(|v| dtype_name(Some(v), &self.label(name)).transpose())
            .transpose()
    }
}

/// The `TypeError` for an option `function` does not have, suggesting the closest known one.
fn unknown_option(function: &str, key: &str, known: &[&str]) -> Error {
    let suggestion = known
        .iter()
        .map(|k| (edit_distance(&key.to_lowercase(), &k.to_lowercase()), k))
        .filter(|&(d, _)| d <= 2)
        .min()
        .map(|(_, k)| format!(" (did you mean \"{k}\"?)"))
        .unwrap_or_default();
    let options = match known {
        [] => "it takes no options".to_owned(),
        _ => format!("its options are {}", known.join(", ")),
    };
    Error::type_error(
        "ERR_DLBRIDGE_UNKNOWN_OPTION",
        format!("{function}: unknown option {key:?}{suggestion}; {options}"),
    )
}

/// Levenshtein distance between two short strings (by characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance("readonly", "readonly"), 0);
        assert_eq!(edit_distance("stride", "strides"), 1);
        assert_eq!(edit_distance("offest", "offset"), 2);
        assert_eq!(edit_distance("lgacy", "legacy"), 1);
        assert_eq!(edit_distance("", "copy"), 4);
    }
}
