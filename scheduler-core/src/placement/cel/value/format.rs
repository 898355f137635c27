//! A named format of Kubernetes' CEL `format` functions as a value: what `format.named(name)` and
//! `format.<name>()` return and `validate(string)` runs.

pub struct NamedFormat {
    pub name: &'static str,
    /// What is wrong with a string; empty when it is valid.
    pub validate: fn(&str) -> Vec<String>,
}

impl std::fmt::Debug for NamedFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}
